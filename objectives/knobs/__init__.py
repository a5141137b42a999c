"""The knobs: one module each, and ``KNOBS``, the one list every other place reads.

A knob module owns its typed config section (a dataclass, a docstring per
field), its value rules and the rules that tie it to other knobs, its
hardware check against the one ``Hardware`` record (objectives/hardware.py,
the same check in doctor, the search space and the trial) and its
``apply_*`` functions, each taking only its own section. It ends with
``KNOB = Knob(...)`` (objectives/knobs/knob.py), listed here.

``KNOBS`` is in the README's order; ``RUN_ORDER`` is the order in which
objectives/run.py applies them, with the reason for each place (a test
reads run.py and checks it calls them in this order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from objectives.config_check import ConfigError, HardwareError
from objectives.hardware import Hardware
from objectives.knobs import (
    batch_size,
    compile,
    framework,
    loader,
    memory,
    model_pruning,
    optimizer,
    parallel,
    precision,
)
from objectives.knobs.knob import Knob

if TYPE_CHECKING:
    from objectives.config import TrialConfig

__all__ = ["KNOBS", "RUN_ORDER", "SPEED_ONLY", "WORK_NEUTRAL", "Knob", "broken_rules", "check_combinations",
           "check_hardware", "unused_keys"]

KNOBS: tuple[Knob, ...] = (
    batch_size.KNOB,
    loader.KNOB,
    precision.KNOB,
    model_pruning.KNOB,
    parallel.KNOB,
    compile.KNOB,
    memory.KNOB,
    framework.KNOB,
    optimizer.KNOB,
)

# Keys that change how fast the same training runs, not what it computes (each knob's KNOB.speed_only).
SPEED_ONLY: frozenset[str] = frozenset(k for knob in KNOBS for k in knob.speed_only)
# Keys that change the maths but not the work a step does (each knob's KNOB.work_neutral): the learning rate.
WORK_NEUTRAL: frozenset[str] = frozenset(k for knob in KNOBS for k in knob.work_neutral)

RUN_ORDER: tuple[tuple[str, str], ...] = (
    ("apply_expandable_segments", "first, as the trial process's PYTORCH_CUDA_ALLOC_CONF: the allocator reads it "
                                  "once, when CUDA starts, and DDP ranks inherit it"),
    ("apply_threads", "each rank sets its threads before any torch work"),
    ("prune_and_count", "model pruning on the plain module: torch-pruning traces the graph and replaces layers, "
                        "and parameter and FLOP counts are taken on either side of it"),
    ("apply_precision", "next, because fp8 swaps Linear modules"),
    ("apply_activation_checkpointing", "after that, so it wraps the final blocks"),
    ("apply_framework", "channels_last before compile, so compile sees the memory format it will run"),
    ("apply_compile", "before DDP, as torchtitan does, so DDP's hooks see the compiled module's parameters"),
    ("apply_compile_loss", "the training loss compiled on a graph of its own when the model is compiled"),
    ("apply_ddp", "the last change to the model"),
    ("apply_lr_scaling", "the LR of the global batch, which DDP's world size and gradient accumulation set"),
    ("build_optimizer", "last on the model, so it holds exactly the final parameters"),
    ("apply_loader", "the loader, after the model: batch-side knobs act on the loader and the loop"),
)


def check_combinations(cfg: TrialConfig) -> None:
    """Every rule that ties knobs together on any machine; raises the first broken one."""
    for knob in KNOBS:
        if knob.check_combinations is not None:
            knob.check_combinations(cfg)


def check_hardware(cfg: TrialConfig, hw: Hardware) -> None:
    """Every knob's hardware check on this config; raises the first HardwareError."""
    for knob in KNOBS:
        if knob.check_hardware is not None:
            knob.check_hardware(section_of(cfg, knob), hw)


def broken_rules(cfg: TrialConfig, hw: Hardware | None) -> list[ConfigError]:
    """Every combination rule and (with ``hw``) hardware check this config breaks, at most one per check."""
    broken: list[ConfigError] = []
    for knob in KNOBS:
        checks = [(knob.check_combinations, (cfg,))]
        if hw is not None:
            checks.append((knob.check_hardware, (section_of(cfg, knob), hw)))
        for check, args in checks:
            if check is None:
                continue
            try:
                check(*args)  # type: ignore[operator]
            except ConfigError as err:
                broken.append(err)
    return broken


def machine_first(broken: list[ConfigError]) -> ConfigError | None:
    """The first of ``broken`` that this machine cannot run, else the first: a rule's fix would not make the
    configuration run here, so the more lasting reason is said first. None when nothing is broken."""
    return next((err for err in broken if isinstance(err, HardwareError)), broken[0] if broken else None)


def unused_keys(cfg: TrialConfig) -> set[str]:
    """The keys this config's other values leave without effect (persistent workers without workers)."""
    return {key for knob in KNOBS if knob.unused is not None for key in knob.unused(section_of(cfg, knob))}


def resolved_values(cfg: TrialConfig, hw: Hardware) -> dict[str, Any]:
    """The keys written as "auto" (null) in this config, as a trial on this machine runs them."""
    return {key: value for knob in KNOBS if knob.resolved is not None
            for key, value in knob.resolved(section_of(cfg, knob), hw).items()}


def section_of(cfg: TrialConfig, knob: Knob) -> Any:
    return getattr(cfg, knob.section)

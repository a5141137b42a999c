"""Typed trial configuration and its strict parser.

The sweep hands a trial a plain nested dict (YAML already resolved). Every knob
is a typed field with the same default as conf/, defined by the knob's own
module (objectives/knobs/) and collected here from ``objectives.knobs.KNOBS``,
so code reads ``cfg.precision`` instead of digging strings out of dicts, and a
bad value is caught before any model is built, as one line that says the
rule, the value and the fix.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from objectives.config_check import CombinationError, ConfigError, HardwareError, Rule, checked, parse_section
from objectives.knobs import KNOBS, check_combinations
from objectives.knobs.batch_size import LR_SCALINGS
from objectives.knobs.compile import COMPILE_MODES
from objectives.knobs.framework import FrameworkConfig
from objectives.knobs.loader import LoaderConfig
from objectives.knobs.memory import MemoryConfig
from objectives.knobs.model_pruning import MODEL_PRUNING_METHODS, ModelPruningConfig
from objectives.knobs.optimizer import OptimConfig
from objectives.knobs.parallel import ParallelConfig
from objectives.knobs.precision import PRECISIONS
from objectives.objective_config import (
    OBJECTIVES,
    CustomConfig,
    DigitsConfig,
    GptConfig,
    ObjectiveConfig,
    ResnetConfig,
    parse_objective,
)

__all__ = [
    "COMBINATION_RULES",
    "COMPILE_MODES",
    "LR_SCALINGS",
    "MODEL_PRUNING_METHODS",
    "OBJECTIVES",
    "PRECISIONS",
    "CombinationError",
    "ConfigError",
    "CustomConfig",
    "DigitsConfig",
    "FrameworkConfig",
    "GptConfig",
    "HardwareError",
    "LoaderConfig",
    "MemoryConfig",
    "ModelPruningConfig",
    "ObjectiveConfig",
    "OptimConfig",
    "ParallelConfig",
    "ResnetConfig",
    "TrainConfig",
    "TrialConfig",
    "parse_config",
    "parse_values",
    "with_values",
]


@dataclass
class TrainConfig:
    """The ``train`` section: the budget and the timing, the same for every trial (not a knob)."""

    budget_samples: int = 8000
    """Training samples per trial, the same for every trial."""
    warmup_steps: int = 5
    """Steps left out of throughput."""
    window_steps: int = 10
    """Steps per timed window; throughput is the median window."""
    seed: int = 0
    """Seed of the initial weights and the data order."""
    eval_batch_size: int = 512
    """Batch size of the evaluation."""
    target_val_accuracy: float | None = field(default=None, metadata={"kind": float})
    """Time to accuracy: stop at this val_accuracy and report time_to_accuracy_s; null: no target."""
    eval_every_samples: int = 0
    """Evaluation interval (target, early stopping's curve); 0: every ~10% of budget_samples."""
    probe_steps: int = 20
    """Timed steps after warm-up that measure throughput before the rest of the budget trains."""
    stop_below_samples_per_s: float | None = field(default=None, metadata={"kind": float})
    """Set per trial by the sweep: a throughput probe below it stops the trial; null: never."""
    throughput_only: bool = False
    """Time the warm-up and at least 3 windows (train.probe_steps or more), skip evaluation: the sweep sets it
    where the accuracy of these maths is known from an earlier trial (search/sweep/staging.py)."""


@dataclass
class TrialConfig:
    """One trial's whole configuration: the workload, every knob, the budget."""

    objective: ObjectiveConfig = field(default_factory=DigitsConfig)
    """The workload and its own settings (objectives/objective_config.py)."""
    batch_size: int = 64
    """Samples per device (per DDP rank) per step."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """AdamW and its LR rule."""
    loader: LoaderConfig = field(default_factory=LoaderConfig)
    """DataLoader workers."""
    precision: str = "fp32"
    """fp32 | tf32 | bf16 | fp16 | fp8."""
    model_pruning: ModelPruningConfig = field(default_factory=ModelPruningConfig)
    """Model pruning before training."""
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    """DDP ranks, threads, compile, gradient accumulation."""
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    """Activation checkpointing and the CUDA allocator."""
    framework: FrameworkConfig = field(default_factory=FrameworkConfig)
    """channels_last and cudnn.benchmark."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """The budget and the timing."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_SECTIONS: dict[str, type] = {
    **{knob.section: knob.config for knob in KNOBS if knob.config is not None},
    "train": TrainConfig,
}
_TOP_LEVEL = tuple(knob.section for knob in KNOBS if knob.config is None and "." not in knob.section
                   and knob.section not in _SECTIONS)

_RULES: dict[str, Rule] = {
    **{key: rule for knob in KNOBS for key, rule in knob.rules.items()},
    "train.budget_samples": ("an int >= 1", lambda v: v >= 1, 8000),
    "train.warmup_steps": ("an int >= 0", lambda v: v >= 0, 5),
    "train.window_steps": ("an int >= 1", lambda v: v >= 1, 10),
    "train.seed": ("an int >= 0", lambda v: v >= 0, 0),
    "train.eval_batch_size": ("an int >= 1", lambda v: v >= 1, 512),
    "train.target_val_accuracy": ("null or a float in (0, 1]", lambda v: 0 < v <= 1, 0.9),
    "train.eval_every_samples": ("an int >= 0", lambda v: v >= 0, 0),
    "train.probe_steps": ("an int >= 1", lambda v: v >= 1, 20),
    "train.stop_below_samples_per_s": ("null or a finite float >= 0", lambda v: v >= 0 and math.isfinite(v), 1000.0),
}

# The rules that tie knobs together on any machine, in words (python -m search doctor lists them).
COMBINATION_RULES: tuple[str, ...] = tuple(text for knob in KNOBS for text in knob.combination_rules)


def parse_config(cfg: dict[str, Any]) -> TrialConfig:
    """Build a TrialConfig from a resolved config dict, strictly: each value, then the rules that tie them.

    Unknown top-level sections are ignored because the same dict carries
    sections for the sweep itself (``trial``, ``hydra``...); unknown keys
    inside a knob section are rejected because they are almost always typos
    that would otherwise silently run the default. Hardware checks happen in
    run_trial, not here, so the sweep can parse configs on a machine without
    the accelerator.
    """
    trial = parse_values(cfg)
    check_combinations(trial)
    return trial


def parse_values(cfg: dict[str, Any]) -> TrialConfig:
    """``parse_config`` without the combination rules: each value checked on its own.

    The sweep parses its space this way and applies the combination rules to
    the space itself (search/sweep/combinations.py), so a value that breaks a
    rule only with another swept value is not bad input.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"config must be a mapping; got {type(cfg).__name__}; fix: pass a dict of sections")
    defaults = TrialConfig()
    objective = parse_objective(cfg.get("objective"))
    sections = {name: parse_section(name, cls, cfg.get(name), _RULES) for name, cls in _SECTIONS.items()}
    top = {key: checked(key, cfg[key], getattr(defaults, key), _RULES) for key in _TOP_LEVEL if key in cfg}
    return TrialConfig(objective=objective, **sections, **top)


def with_values(cfg: TrialConfig, values: Mapping[str, Any]) -> TrialConfig:
    """``cfg`` with the dotted keys that name its knob and train fields set to ``values`` (each value checked).

    Other keys (a config group such as ``objective``, keys of the sweep
    itself) are left out: the rules read knob fields only.
    """
    out = cfg
    for key, value in values.items():
        section, _, name = key.partition(".")
        if not name and section in _TOP_LEVEL:
            out = dataclasses.replace(out, **{section: checked(key, value, getattr(TrialConfig(), section), _RULES)})
        elif name and section in _SECTIONS and name in {f.name for f in dataclasses.fields(_SECTIONS[section])}:
            part = getattr(out, section)
            kind = next(f for f in dataclasses.fields(part) if f.name == name).metadata.get("kind")
            new = checked(key, value, getattr(_SECTIONS[section](), name), _RULES, kind)
            out = dataclasses.replace(out, **{section: dataclasses.replace(part, **{name: new})})
    return out

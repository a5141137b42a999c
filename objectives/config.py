"""Typed trial configuration and its strict parser.

The sweep hands a trial a plain nested dict (YAML already resolved). Every knob
is a typed field here with the same default as conf/, so code reads
``cfg.precision`` instead of digging strings out of dicts, and a bad value is
caught before any model is built, as one line that says the rule, the value
and the fix.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from objectives.config_check import CombinationError, ConfigError, Rule, checked, parse_section
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
    "OBJECTIVES",
    "CombinationError",
    "ConfigError",
    "CustomConfig",
    "DigitsConfig",
    "GptConfig",
    "ObjectiveConfig",
    "ResnetConfig",
    "TrialConfig",
    "parse_config",
]

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
MODEL_PRUNING_METHODS = ("structured", "unstructured", "2:4")
LR_SCALINGS = ("sqrt", "linear", "none")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")


@dataclass
class OptimConfig:
    lr: float = 0.005
    base_batch_size: int = 64
    lr_scaling: str = "sqrt"
    weight_decay: float = 0.0
    fused: bool = False


@dataclass
class LoaderConfig:
    num_workers: int = 0
    pin_memory: bool | None = field(default=None, metadata={"kind": bool})  # null: on when the trial trains on CUDA
    persistent_workers: bool = False
    prefetch_factor: int = 2
    augment_on_device: bool = False


@dataclass
class ModelPruningConfig:
    ratio: float = 0.0
    method: str = "structured"


@dataclass
class ParallelConfig:
    devices: int = 1
    threads: int = 1
    compile: str = "none"
    compile_backend: str = "inductor"
    grad_accum: int = 1


@dataclass
class MemoryConfig:
    activation_checkpointing: bool = False
    expandable_segments: bool = False


@dataclass
class FrameworkConfig:
    channels_last: bool = False
    cudnn_benchmark: bool = False


@dataclass
class TrainConfig:
    budget_samples: int = 8000
    warmup_steps: int = 5
    window_steps: int = 10
    seed: int = 0
    eval_batch_size: int = 512
    target_val_accuracy: float | None = field(default=None, metadata={"kind": float})  # null: no time-to-accuracy
    eval_every_samples: int = 0  # 0: every ~10% of budget_samples (time to accuracy, early stopping's curve)
    probe_steps: int = 20  # timed steps after warm-up that measure throughput before the rest of the budget trains
    # Set per trial by the sweep: a throughput probe below it stops the trial; null: never.
    stop_below_samples_per_s: float | None = field(default=None, metadata={"kind": float})


@dataclass
class TrialConfig:
    objective: ObjectiveConfig = field(default_factory=DigitsConfig)
    batch_size: int = 64
    optim: OptimConfig = field(default_factory=OptimConfig)
    loader: LoaderConfig = field(default_factory=LoaderConfig)
    precision: str = "fp32"
    model_pruning: ModelPruningConfig = field(default_factory=ModelPruningConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    framework: FrameworkConfig = field(default_factory=FrameworkConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_SECTIONS = {
    "optim": OptimConfig,
    "loader": LoaderConfig,
    "model_pruning": ModelPruningConfig,
    "parallel": ParallelConfig,
    "memory": MemoryConfig,
    "framework": FrameworkConfig,
    "train": TrainConfig,
}

# (rule text, check, suggested fix value) per field, keyed by dotted path.
_RULES: dict[str, Rule] = {
    "batch_size": ("an int >= 1", lambda v: v >= 1, 64),
    "optim.lr": ("a finite float > 0", lambda v: v > 0 and math.isfinite(v), 0.005),
    "optim.base_batch_size": ("an int >= 1", lambda v: v >= 1, 64),
    "optim.lr_scaling": (f"one of {', '.join(LR_SCALINGS)}", lambda v: v in LR_SCALINGS, "sqrt"),
    "optim.weight_decay": ("a finite float >= 0", lambda v: v >= 0 and math.isfinite(v), 0.0),
    "loader.num_workers": ("an int >= 0", lambda v: v >= 0, 0),
    "loader.prefetch_factor": ("an int >= 1", lambda v: v >= 1, 2),
    "precision": (f"one of {', '.join(PRECISIONS)}", lambda v: v in PRECISIONS, "bf16"),
    "model_pruning.ratio": ("a float in [0, 0.9]", lambda v: 0 <= v <= 0.9, 0.5),
    "model_pruning.method": (
        f"one of {', '.join(MODEL_PRUNING_METHODS)}",
        lambda v: v in MODEL_PRUNING_METHODS,
        "structured",
    ),
    "parallel.devices": ("an int >= 1", lambda v: v >= 1, 1),
    "parallel.threads": ("an int >= 1", lambda v: v >= 1, 1),
    "parallel.compile": (f"one of {', '.join(COMPILE_MODES)}", lambda v: v in COMPILE_MODES, "default"),
    "parallel.compile_backend": ("a torch.compile backend name", lambda v: v != "", "inductor"),
    "parallel.grad_accum": ("an int >= 1", lambda v: v >= 1, 1),
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


def parse_config(cfg: dict[str, Any]) -> TrialConfig:
    """Build a TrialConfig from a resolved config dict, strictly.

    Unknown top-level sections are ignored because the same dict carries
    sections for the sweep itself (``trial``, ``hydra``...); unknown keys
    inside a knob section are rejected because they are almost always typos
    that would otherwise silently run the default. Hardware checks happen in
    run_trial, not here, so the sweep can parse configs on a machine without
    the accelerator.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"config must be a mapping; got {type(cfg).__name__}; fix: pass a dict of sections")
    defaults = TrialConfig()
    objective = parse_objective(cfg.get("objective"))
    sections = {name: parse_section(name, cls, cfg.get(name), _RULES) for name, cls in _SECTIONS.items()}
    top = {
        key: checked(key, cfg[key], getattr(defaults, key), _RULES)
        for key in ("batch_size", "precision")
        if key in cfg
    }
    trial = TrialConfig(objective=objective, **sections, **top)
    _check_combinations(trial)
    return trial


# The rules below that tie knobs together on any machine, in words (python -m search doctor lists them).
COMBINATION_RULES = (
    "precision=fp8 needs parallel.compile other than none (eager fp8 is slower than bf16)",
    "model_pruning.method=2:4 needs precision bf16 or fp16 (the sparse kernels take half precision only)",
)


def _check_combinations(cfg: TrialConfig) -> None:
    """Rules that tie two fields together, worded like the single-field ones.

    The rules that hold on any machine live here, so the sweep checks them
    before its first trial; what a machine can run is each knob's own check.
    """
    if cfg.parallel.compile != "none" and cfg.train.warmup_steps < 1:
        raise ConfigError(
            f"train.warmup_steps must be >= 1 with parallel.compile={cfg.parallel.compile}, so compilation stays "
            f"out of throughput; got {cfg.train.warmup_steps}; fix: train.warmup_steps=5"
        )
    if cfg.model_pruning.method == "2:4" and cfg.model_pruning.ratio not in (0.0, 0.5):
        raise ConfigError(
            f"model_pruning.ratio must be 0 or 0.5 with model_pruning.method=2:4 (two of every four weights); "
            f"got {cfg.model_pruning.ratio}; fix: model_pruning.ratio=0.5"
        )
    if cfg.precision == "fp8" and cfg.parallel.compile == "none":
        raise CombinationError(
            "parallel.compile must not be none with precision=fp8 (torchao's float8 casts are fast only when "
            "compiled; eager fp8 is slower than bf16); got parallel.compile=none; fix: parallel.compile=default",
            ("precision", "parallel.compile"),
        )
    if cfg.model_pruning.method == "2:4" and cfg.model_pruning.ratio > 0 and cfg.precision not in ("bf16", "fp16"):
        raise CombinationError(
            f"precision must be bf16 or fp16 with model_pruning.method=2:4 (the 2:4 sparse kernels take half "
            f"precision only); got precision={cfg.precision}; fix: precision=bf16",
            ("precision", "model_pruning.method", "model_pruning.ratio"),
        )

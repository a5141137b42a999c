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

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
MODEL_PRUNING_METHODS = ("structured", "unstructured")
LR_SCALINGS = ("sqrt", "linear", "none")
OBJECTIVES = ("digits",)


class ConfigError(ValueError):
    """A config value a trial cannot run; the message is one line: rule, value, fix."""


@dataclass
class ObjectiveConfig:
    name: str = "digits"
    image_size_px: int = 32
    augment: bool = True
    val_fraction: float = 0.2
    channels: list[int] = field(default_factory=lambda: [16, 32])


@dataclass
class OptimConfig:
    lr: float = 0.005
    base_batch_size: int = 64
    lr_scaling: str = "sqrt"
    weight_decay: float = 0.0


@dataclass
class LoaderConfig:
    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int = 2


@dataclass
class ModelPruningConfig:
    ratio: float = 0.0
    method: str = "structured"


@dataclass
class ParallelConfig:
    devices: int = 1
    threads: int = 1


@dataclass
class TrainConfig:
    budget_samples: int = 8000
    warmup_steps: int = 5
    window_steps: int = 10
    seed: int = 0
    eval_batch_size: int = 512


@dataclass
class TrialConfig:
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    batch_size: int = 64
    optim: OptimConfig = field(default_factory=OptimConfig)
    loader: LoaderConfig = field(default_factory=LoaderConfig)
    precision: str = "fp32"
    model_pruning: ModelPruningConfig = field(default_factory=ModelPruningConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_SECTIONS = {
    "objective": ObjectiveConfig,
    "optim": OptimConfig,
    "loader": LoaderConfig,
    "model_pruning": ModelPruningConfig,
    "parallel": ParallelConfig,
    "train": TrainConfig,
}

# (rule text, check, suggested fix value) per field, keyed by dotted path.
_RULES: dict[str, tuple[str, Any, Any]] = {
    "objective.name": (f"one of {', '.join(OBJECTIVES)}", lambda v: v in OBJECTIVES, "digits"),
    "objective.image_size_px": ("an int in [8, 256]", lambda v: 8 <= v <= 256, 32),
    "objective.val_fraction": ("a float in (0, 0.9]", lambda v: 0 < v <= 0.9, 0.2),
    "objective.channels": ("a non-empty list of ints >= 1", lambda v: len(v) > 0 and all(c >= 1 for c in v), "[16,32]"),
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
    "train.budget_samples": ("an int >= 1", lambda v: v >= 1, 8000),
    "train.warmup_steps": ("an int >= 0", lambda v: v >= 0, 5),
    "train.window_steps": ("an int >= 1", lambda v: v >= 1, 10),
    "train.seed": ("an int >= 0", lambda v: v >= 0, 0),
    "train.eval_batch_size": ("an int >= 1", lambda v: v >= 1, 512),
}


def _fail(path: str, rule: str, value: Any, fix: Any) -> ConfigError:
    return ConfigError(f"{path} must be {rule}; got {value!r}; fix: {path}={fix}")


def _coerce(path: str, value: Any, default: Any) -> Any:
    """Check the value's type against the default's; bools are never numbers."""
    fix = _RULES.get(path, (None, None, default))[2]
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise _fail(path, "a bool (true or false)", value, str(default).lower())
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(path, "an int", value, fix)
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(path, "a number", value, fix)
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise _fail(path, "a string", value, fix)
        return value
    if isinstance(default, list):
        if not isinstance(value, (list, tuple)) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in value
        ):
            raise _fail(path, "a list of ints", value, fix)
        return list(value)
    raise AssertionError(f"no type rule for {path}")


def _checked(path: str, value: Any, default: Any) -> Any:
    value = _coerce(path, value, default)
    if path in _RULES:
        rule, ok, fix = _RULES[path]
        if not ok(value):
            raise _fail(path, rule, value, fix)
    return value


def _parse_section(name: str, raw: Any) -> Any:
    cls = _SECTIONS[name]
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise ConfigError(f"{name} must be a mapping; got {raw!r}; fix: remove {name} to use its defaults")
    defaults = cls()
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(str(k) for k in raw if k not in valid)
    if unknown:
        raise ConfigError(
            f"{name} has unknown key {unknown[0]!r}; valid keys are {', '.join(valid)}; "
            f"fix: remove {name}.{unknown[0]} or use one of the valid keys"
        )
    values = {k: _checked(f"{name}.{k}", v, getattr(defaults, k)) for k, v in raw.items()}
    return cls(**values)


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
    sections = {name: _parse_section(name, cfg.get(name)) for name in _SECTIONS}
    top = {
        key: _checked(key, cfg[key], getattr(defaults, key))
        for key in ("batch_size", "precision")
        if key in cfg
    }
    return TrialConfig(**sections, **top)

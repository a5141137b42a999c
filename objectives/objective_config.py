"""The ``objective`` section: which workload a trial trains, one typed dataclass per name.

The section's valid keys depend on ``objective.name`` (a gpt has no conv
``channels``, digits has no ``seq_len``), so the name is read first and the
rest is checked against that workload's dataclass, whose defaults equal
conf/objective/<name>.yaml. ``measures_accuracy`` tells the sweep whether
``val_accuracy`` exists at all (resnet trains on random tensors, so it does
not), which is how it knows to optimise throughput alone.

A name other than the built-in ones is the user's own objective: it has the
``custom`` section (a callable, or model and data by ``_target_``) and names
the sweep's study and MLflow experiment (``objective_label``), so two
objectives of a user never share one study.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Union

from objectives.config_check import ConfigError, Rule, fail, parse_section

OBJECTIVES = ("digits", "gpt", "resnet", "custom")
BUILT_IN = ("digits", "gpt", "resnet")  # any other name is the user's own objective (the custom section)
CUSTOM_KEYS = ("callable", "model", "train_dataset")
GPT_SIZES = ("tiny", "gpt2-small")
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*[:.][A-Za-z_]\w*$")
_OWN_NAME = re.compile(r"^[A-Za-z0-9_][\w.\-]*$")  # a study name, an MLflow experiment, part of a file name


@dataclass
class DigitsConfig:
    name: str = "digits"
    image_size_px: int = 32
    augment: bool = True
    val_fraction: float = 0.2
    channels: list[int] = field(default_factory=lambda: [16, 32])
    measures_accuracy: bool = True


@dataclass
class GptConfig:
    name: str = "gpt"
    size: str = "tiny"
    seq_len: int | None = field(default=None, metadata={"kind": int})
    corpus_max_bytes: int = 2_000_000
    val_fraction: float = 0.1
    val_batches: int = 8
    measures_accuracy: bool = True


@dataclass
class ResnetConfig:
    name: str = "resnet"
    image_size_px: int = 64
    widths: list[int] = field(default_factory=lambda: [32, 64, 128])
    blocks_per_stage: int = 1
    num_classes: int = 1000
    dataset_size: int = 2048
    measures_accuracy: bool = False


@dataclass
class CustomConfig:
    """The user's own objective: a ``callable`` returning metrics, or ``_target_`` specs to train."""

    name: str = "custom"
    callable: str | None = field(default=None, metadata={"kind": str})
    model: dict[str, Any] | None = field(default=None, metadata={"kind": dict})
    train_dataset: dict[str, Any] | None = field(default=None, metadata={"kind": dict})
    val_dataset: dict[str, Any] | None = field(default=None, metadata={"kind": dict})
    loss: dict[str, Any] | None = field(default=None, metadata={"kind": dict})
    measures_accuracy: bool | None = field(default=None, metadata={"kind": bool})  # null: true iff val_dataset
    # What `callable` applies, as config keys or sections ([batch_size, loader]); the sweep drops the rest of
    # its space with one line. null: it declares nothing and every swept knob is kept.
    knobs: list[str] | None = field(default=None, metadata={"kind": list})


ObjectiveConfig = Union[DigitsConfig, GptConfig, ResnetConfig, CustomConfig]
_CLASSES = {"digits": DigitsConfig, "gpt": GptConfig, "resnet": ResnetConfig, "custom": CustomConfig}


def _is_spec(v: dict) -> bool:
    return isinstance(v.get("_target_"), str) and bool(_DOTTED.match(v["_target_"]))


_SPEC_RULE = "a mapping with _target_: 'package.module.Callable'"
_RULES: dict[str, Rule] = {
    "objective.image_size_px": ("an int in [8, 256]", lambda v: 8 <= v <= 256, 32),
    "objective.val_fraction": ("a float in (0, 0.9]", lambda v: 0 < v <= 0.9, 0.2),
    "objective.channels": ("a non-empty list of ints >= 1", lambda v: len(v) > 0 and all(c >= 1 for c in v), "[16,32]"),
    "objective.size": (f"one of {', '.join(GPT_SIZES)}", lambda v: v in GPT_SIZES, "tiny"),
    "objective.seq_len": ("null or an int in [1, 65536]", lambda v: 1 <= v <= 65536, "null"),
    "objective.corpus_max_bytes": ("an int >= 10000", lambda v: v >= 10_000, 2_000_000),
    "objective.val_batches": ("an int >= 1", lambda v: v >= 1, 8),
    "objective.widths": ("a non-empty list of ints >= 1", lambda v: len(v) > 0 and all(c >= 1 for c in v), "[32,64,128]"),
    "objective.blocks_per_stage": ("an int >= 1", lambda v: v >= 1, 1),
    "objective.num_classes": ("an int >= 2", lambda v: v >= 2, 1000),
    "objective.dataset_size": ("an int >= 1", lambda v: v >= 1, 2048),
    "objective.callable": ("'package.module:function'", lambda v: bool(_DOTTED.match(v)), "mypkg.train:objective"),
    "objective.model": (_SPEC_RULE, _is_spec, "{_target_:mypkg.models.Net}"),
    "objective.train_dataset": (_SPEC_RULE, _is_spec, "{_target_:mypkg.data.TrainSet}"),
    "objective.val_dataset": (_SPEC_RULE, _is_spec, "{_target_:mypkg.data.ValSet}"),
    "objective.loss": (_SPEC_RULE, _is_spec, "{_target_:torch.nn.CrossEntropyLoss}"),
}
_GPT_RULES = {**_RULES, "objective.val_fraction": ("a float in (0, 0.5]", lambda v: 0 < v <= 0.5, 0.1)}
_RESNET_RULES = {
    **_RULES,
    "objective.image_size_px": ("an int in [32, 512]", lambda v: 32 <= v <= 512, 64),
    "objective.measures_accuracy": (
        "false (resnet trains on random tensors: throughput only)",
        lambda v: v is False,
        "false",
    ),
}


def parse_objective(raw: Any) -> ObjectiveConfig:
    """The objective section, checked against the dataclass its ``name`` selects."""
    if raw is None:
        return DigitsConfig()
    if not isinstance(raw, dict):
        raise ConfigError(f"objective must be a mapping; got {raw!r}; fix: remove objective to use its defaults")
    name = raw.get("name", "digits")
    if name not in BUILT_IN:
        _check_own_name(name, raw)
    rules = {"gpt": _GPT_RULES, "resnet": _RESNET_RULES}.get(name, _RULES)
    section = parse_section("objective", _CLASSES.get(name, CustomConfig), raw, rules, what=f" (name {name})")
    return _check_custom(section) if isinstance(section, CustomConfig) else section


def _check_own_name(name: Any, raw: dict) -> None:
    """The user's own objective may have any plain name, with a callable or a model to train."""
    rule = (f"one of {', '.join(BUILT_IN)}, or your own objective's name (letters, digits, '_', '.', '-') "
            f"with objective.callable or objective.model and objective.train_dataset")
    if not isinstance(name, str) or not _OWN_NAME.match(name):
        raise fail("objective.name", rule, name, "my_model")
    if name != "custom" and not any(raw.get(key) is not None for key in CUSTOM_KEYS):
        raise ConfigError(f"objective.name must be {rule}; got {name!r}, with neither; fix: objective.name=digits, "
                          f"or objective=custom objective.name={name} objective.callable=mypkg.train:objective")


def objective_label(raw: dict) -> str:
    """What names the objective's study and MLflow experiment: its name, or for the generic
    ``name: custom``, the ``_target_`` of its model or its callable (``:`` written ``.``), so
    that two models of a user never share one study."""
    name = str(raw.get("name") or "digits")
    if name != "custom":
        return name
    model = raw.get("model")
    target = model.get("_target_") if isinstance(model, dict) else raw.get("callable")
    return str(target).replace(":", ".") if target else name


def _check_custom(c: CustomConfig) -> CustomConfig:
    """Exactly one way to run: a callable, or a model with a training set."""
    trains = c.model is not None or c.train_dataset is not None
    if c.callable is not None and (trains or c.val_dataset is not None or c.loss is not None):
        raise ConfigError(
            f"objective.callable excludes model, train_dataset, val_dataset and loss; got callable={c.callable!r} "
            "with some of them; fix: keep either objective.callable or objective.model + objective.train_dataset"
        )
    if c.callable is None and (c.model is None or c.train_dataset is None):
        missing = "model" if c.model is None else "train_dataset"
        raise ConfigError(
            f"objective (name custom) needs callable, or model and train_dataset; got no {missing}; "
            f"fix: objective.{missing}={{_target_:mypkg.module.Name}} or objective.callable=mypkg.module:function"
        )
    if c.measures_accuracy and c.callable is None and c.val_dataset is None:
        raise fail(
            "objective.measures_accuracy", "false or null without objective.val_dataset", True, "null"
        )
    if c.measures_accuracy is None:
        # A callable reports what it measures; assume accuracy unless told otherwise,
        # so the default two-objective sweep keeps the val_accuracy it returns.
        c.measures_accuracy = c.callable is not None or c.val_dataset is not None
    return c

"""A custom objective's model and data, built once on the CPU before the sweep creates anything.

The ``_target_``s are only located by objectives.instantiate.check_objective;
a model that is not an ``nn.Module``, a constructor argument misspelt or
missing, a dataset that yields dicts or is a stream would otherwise make
every trial crash or end infeasible, after the study, the MLflow runs and
the sweep directory exist. So the sweep (and ``search run``) builds the
model and datasets here once, reads two items, and runs one forward on a
batch of those two, in eval mode, without gradients. A forward that raises
is left to the trial (the model may take only some batch sizes); what it
returns decides what kind of targets the data has, which the sweep checks
against the metrics it scores (search/sweep/planning.py).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from objectives.config_check import ConfigError
from objectives.instantiate import instantiate

CLASSES, PROBABILITIES, VALUES, UNKNOWN = "class indices", "class probabilities", "values", "unknown"


@dataclass
class Checked:
    """What the build showed: the kind of the validation targets (else the training ones), and the
    model's output shape on a batch of two (None: its forward raised, left to the trial)."""

    targets: str
    target_shape: tuple[int, ...]
    output_shape: tuple[int, ...] | None


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:200]}"


def build(spec: Any, key: str) -> Any:
    """instantiate(), with the user's constructor error as one line naming the arguments it takes."""
    try:
        return instantiate(spec, key)
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - whatever the user's constructor raises
        target = spec.get("_target_", "?") if isinstance(spec, dict) else "?"
        takes = ""
        try:
            from objectives.instantiate import locate

            params = inspect.signature(locate(target, key)).parameters.values()
            names = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            takes = f" ({', '.join(names)})" if names else " (none)"
        except (ConfigError, TypeError, ValueError):
            pass
        raise ConfigError(f"{key} must build from its arguments; got {_one_line(err)} from {target}; "
                          f"fix: give {key} the arguments {target.rpartition('.')[2]} takes{takes}") from None


def _pair(dataset: Any, index: int, key: str) -> tuple[Any, Any]:
    import torch

    fix = "fix: return (input, target) from __getitem__, e.g. return item['image'], item['label']"
    try:
        item = dataset[index]
    except Exception as err:  # noqa: BLE001 - the user's __getitem__
        raise ConfigError(f"{key}[{index}] must return an (input, target) pair; got {_one_line(err)}; {fix}") from None
    if isinstance(item, dict):
        raise ConfigError(f"{key} items must be (input, target) pairs; got a dict with keys "
                          f"{', '.join(map(str, item))}; {fix}")
    if not isinstance(item, (tuple, list)) or len(item) != 2:
        got = f"a {type(item).__name__}" + (f" of {len(item)}" if isinstance(item, (tuple, list)) else "")
        raise ConfigError(f"{key} items must be (input, target) pairs; got {got}; {fix}")
    x, y = item
    for part, value in (("input", x), ("target", y)):
        try:
            torch.as_tensor(value)
        except Exception:  # noqa: BLE001 - anything a tensor cannot be made of
            raise ConfigError(f"{key} item's {part} must be a tensor, an array or a number; got "
                              f"{type(value).__name__}; fix: return tensors from __getitem__") from None
    return x, y


def check_dataset(dataset: Any, key: str) -> list[tuple[Any, Any]]:
    """A map-style dataset with at least one item, whose first two items are (input, target) pairs."""
    from torch.utils.data import IterableDataset

    fix = "fix: a torch.utils.data.Dataset with __len__ and __getitem__ (the sampler shards and reshuffles by index)"
    if isinstance(dataset, IterableDataset) or not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
        kind = "an IterableDataset" if isinstance(dataset, IterableDataset) else "an object"
        raise ConfigError(f"{key} must be a map-style dataset; got {kind} ({type(dataset).__name__}) without "
                          f"__len__ and __getitem__; {fix}")
    try:
        size = len(dataset)
    except Exception as err:  # noqa: BLE001
        raise ConfigError(f"{key} must have a length; got {_one_line(err)} from len(); {fix}") from None
    if size < 1:
        raise ConfigError(f"{key} must hold at least one item; got {size}; fix: check the dataset's arguments")
    return [_pair(dataset, i, key) for i in range(min(2, size))]


def _forward(model: Any, items: list[tuple[Any, Any]]) -> Any:
    """The model's output on a batch of the items, or None when its forward raises (left to the trial)."""
    import torch
    from torch.utils.data import default_collate

    x, _ = default_collate(items)
    model.eval()
    try:
        with torch.no_grad():
            return model(x)
    except Exception:  # noqa: BLE001 - a model that takes only some batch sizes: the trial says why
        return None


def target_kind(target: Any, output_shape: tuple[int, ...] | None) -> str:
    """Class indices (integers), class probabilities (floats of the output's shape per sample), else values;
    unknown for float vectors when the forward raised (no output shape to compare with)."""
    import torch

    y = torch.as_tensor(target)
    if not y.is_floating_point():
        return CLASSES
    if y.dim() == 0 or y.shape[-1] == 1:
        return VALUES
    if output_shape is None:
        return UNKNOWN
    return PROBABILITIES if tuple(y.shape) == output_shape[1:] else VALUES


def check_custom(objective: Any) -> Checked | None:
    """Build the objective's model and datasets once; None for an objective that names none (a built-in one,
    a function). A ConfigError (one line, the rule, the value, the fix) for what every trial would fail on."""
    if getattr(objective, "model", None) is None or getattr(objective, "callable", None) is not None:
        return None
    import torch
    from torch import nn

    model = build(objective.model, "objective.model")
    if not isinstance(model, nn.Module):
        raise ConfigError(f"objective.model must build a torch.nn.Module; got {type(model).__name__}; "
                          "fix: point objective.model._target_ at a Module class")
    items = check_dataset(build(objective.train_dataset, "objective.train_dataset"), "objective.train_dataset")
    val_items = None
    if getattr(objective, "val_dataset", None) is not None:
        val_items = check_dataset(build(objective.val_dataset, "objective.val_dataset"), "objective.val_dataset")
    out = _forward(model, items)
    if out is not None and not isinstance(out, torch.Tensor):
        raise ConfigError(f"objective.model's forward must return one tensor (the logits); got "
                          f"{type(out).__name__}; fix: return the output tensor from forward")
    output_shape = tuple(out.shape) if out is not None else None
    target = (val_items or items)[0][1]
    kind = target_kind(target, output_shape)
    shape = tuple(torch.as_tensor(target).shape)
    if getattr(objective, "loss", None) is None and output_shape is not None and kind == VALUES:
        raise ConfigError(f"objective.loss must be set for targets that are neither class indices nor class "
                          f"probabilities of the output's shape (the default is cross-entropy); got float targets "
                          f"of shape {shape} for outputs of shape {output_shape[1:]}; fix: "
                          "objective.loss={_target_: torch.nn.MSELoss}")
    return Checked(kind, shape, output_shape)


def check_scored(checked: Checked | None, named: dict[str, str]) -> None:
    """val_accuracy (argmax == target) needs class targets: with values (regression) no trial would report it,
    and a sweep that scores it would find every trial infeasible."""
    if checked is None or checked.targets != VALUES or "val_accuracy" not in named:
        return
    raise ConfigError(f"{named['val_accuracy']} names val_accuracy, which needs class targets; got float targets "
                      f"of shape {checked.target_shape} (regression); fix: sweep for speed with val_loss bounded, "
                      "hydra.sweeper.metrics=[throughput_samples_per_s] hydra.sweeper.direction=maximize "
                      "\"hydra.sweeper.constraints=['val_loss <= 0.15']\" (your bound), or "
                      "objective.measures_accuracy=false for speed alone")

"""The user's own objective, without Hydra: a function that returns metrics, or specs to train.

Its ``objective.name`` is ``custom`` or any name of the user's (objectives/objective_config.py),
which names the sweep's study and MLflow experiment.

``objective.callable: "pkg.module:function"`` hands the whole trial config
dict to the user's function and reports the metrics it returns; the knobs
are then the user's business, and the result says so (info
``knobs_not_applied`` lists every knob section, and one warning line goes
to stderr).

``objective.model`` / ``train_dataset`` / ``val_dataset`` / ``loss``, each a
``_target_`` mapping built by objectives.instantiate, become a Workload that
runs through the same path as digits, so every knob applies: batch size and
LR scaling, loader workers, precision, model pruning (structured keeps the
output layer whole: the one whose output the forward returns, else the last
Conv or Linear it ran), DDP. Dataset items must be
``(input, target)`` pairs; the loss defaults to cross-entropy, and
``val_accuracy`` (argmax == target) is reported when the targets are class
indices or class probabilities of the output's shape (soft labels, one-hot:
their argmax is the class).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from objectives.config import CustomConfig
from objectives.config_check import ConfigError
from objectives.instantiate import instantiate, locate
from objectives.result import NOT_APPLIED_WARNING, TrialResult
from objectives.workload import Workload, cross_entropy

KNOB_SECTIONS = ("batch_size", "optim", "loader", "precision", "model_pruning", "parallel", "train")


def not_applied_line(objective: str, reasons: dict[str, str]) -> str:
    """One line naming every knob that did not apply and why."""
    said = "; ".join(f"{knob} ({why})" for knob, why in reasons.items())
    return f"warning: objective {objective}: knobs not applied: {said}"


def run_callable(path: str, cfg: dict) -> TrialResult:
    """Call the user's function with the whole trial config and wrap the metrics it returns; info
    ``knobs_not_applied_warning`` names the knobs it leaves unapplied when it declares none (run_trial says it)."""
    fn = locate(path, "objective.callable")
    objective = cfg.get("objective") or {}
    name = str(objective.get("name") or "custom")
    declared = objective.get("knobs")  # what it says it applies; the rest is left to it, unapplied
    unapplied = [s for s in KNOB_SECTIONS
                 if declared is None or not any(k == s or k.startswith(f"{s}.") for k in declared)]
    info = {"knobs_not_applied": ",".join(unapplied), "objective_callable": path}
    if unapplied and declared is None:  # declared: the rest is not searched, which the sweep says in its own line
        why = (f"objective.callable {path} trains by itself; declare what it applies, e.g. "
               "objective.knobs=[batch_size], and the sweep searches only that")
        info[NOT_APPLIED_WARNING] = not_applied_line(name, {",".join(unapplied): why})
    metrics = fn(cfg)
    if not isinstance(metrics, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in metrics.values()
    ):
        raise TypeError(f"objective.callable {path} must return a dict of metric name -> number; got {metrics!r}")
    metrics = {str(k): float(v) for k, v in metrics.items()}
    bad = sorted(k for k, v in metrics.items() if not math.isfinite(v))
    if bad:
        finite = {k: v for k, v in metrics.items() if math.isfinite(v)}
        return TrialResult("diverged", finite, info, f"objective.callable returned non-finite {', '.join(bad)}")
    return TrialResult("ok", metrics, info)


def _first_input(dataset: Any) -> torch.Tensor:
    try:
        item = dataset[0]
        x = item[0]
    except Exception as err:  # noqa: BLE001 - any failure here means the dataset shape is wrong
        raise ConfigError(
            f"objective.train_dataset must yield (input, target) pairs; got {type(err).__name__}: {err}; "
            "fix: return (x, y) from __getitem__"
        ) from None
    return torch.as_tensor(x).unsqueeze(0)


def output_layers(model: nn.Module, example: torch.Tensor) -> tuple[list[nn.Module], list[nn.Module]]:
    """The model's input and output layers by its forward on the example: the first Linear it ran, and the Conv
    or Linear whose output is the model's output, else the last one it ran. Structured model pruning keeps the
    output layer whole (its outputs are the classes), 2:4 keeps both dense. Registration order says nothing (a
    ``self.classifier`` defined before ``self.body`` was cut from 10 outputs to 5). A forward that raises on the
    example (a model taking only some batch sizes) falls back to the first and last registered Linear."""
    layers = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
    ran: list[tuple[nn.Module, Any]] = []
    hooks = [m.register_forward_hook(lambda m, _, out: ran.append((m, out))) for m in model.modules()
             if isinstance(m, layers)]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(example)
    except Exception:  # noqa: BLE001 - the trial's own forward says why
        linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
        return linears[:1], linears[-1:]
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    first = [m for m, _ in ran if isinstance(m, nn.Linear)][:1]
    if not ran:
        return first, []
    same = [m for m, o in ran if isinstance(o, torch.Tensor) and isinstance(out, torch.Tensor) and o is out]
    return first, same[-1:] or [ran[-1][0]]


def custom_workload(cfg: CustomConfig) -> Workload:
    model = instantiate(cfg.model, "objective.model")
    if not isinstance(model, nn.Module):
        raise ConfigError(
            f"objective.model must build a torch.nn.Module; got {type(model).__name__}; "
            "fix: point objective.model._target_ at a Module class"
        )
    train_set = instantiate(cfg.train_dataset, "objective.train_dataset")
    val_set = instantiate(cfg.val_dataset, "objective.val_dataset") if cfg.val_dataset is not None else None
    loss_fn = instantiate(cfg.loss, "objective.loss") if cfg.loss is not None else cross_entropy
    example = _first_input(train_set)
    first, head = output_layers(model, example)
    return Workload(
        train_set=train_set,
        val_set=val_set,
        model=model,
        example_input=example,
        loss_fn=loss_fn,
        model_pruning_ignored=head,
        semi_sparse_kept=first + [m for m in head if all(m is not f for f in first)],
    )

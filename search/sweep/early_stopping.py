"""Early stopping, decided per trial before it is launched.

Two modes, chosen from the metrics the study optimises (docs/early_stopping.md):

- **one metric** (e.g. throughput subject to `val_accuracy >= 0.97`):
  Optuna's pruner (`hydra/sweeper/pruner`) watches the trial's accuracy
  learning curve. The trial gets `trial.optuna_study` and
  `trial.optuna_trial_number` and reports to its own Optuna trial
  (search/trial/learning_curve.py).
- **two metrics, throughput and accuracy** (the default): Optuna's
  pruners refuse multi-objective studies, so a staged rule instead. A completed
  trial with the best accuracy seen so far and throughput T dominates any
  trial that is slower than T, under the assumption that no configuration
  beats the best accuracy seen so far. The trial gets
  `train.stop_below_samples_per_s = T * (1 - margin)` and stops after its
  throughput probe when it is slower than that.

A stopped trial is told to Optuna as PRUNED (outcome `stopped_early`).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import optuna
from hydra.utils import instantiate
from optuna.trial import TrialState

from search.errors import BadInput
from search.sweep.no_repeat import REPLACES_ATTR
from search.sweep.outcome import is_feasible
from search.sweep.space import to_override

THROUGHPUT = "throughput_samples_per_s"
ACCURACY = "val_accuracy"


def make_pruner(cfg: Any) -> optuna.pruners.BasePruner:
    """hydra.sweeper.pruner (a `_target_` node, or null for none) -> an Optuna pruner."""
    if cfg is None:
        return optuna.pruners.NopPruner()
    from omegaconf import OmegaConf

    node = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)
    try:
        pruner = instantiate(node)
    except Exception as err:
        raise BadInput(f"hydra.sweeper.pruner must build an Optuna pruner; got {node.get('_target_')!r} "
                       f"({' '.join(str(err).split())[:160]}); fix: hydra/sweeper/pruner=median") from None
    if not isinstance(pruner, optuna.pruners.BasePruner):
        raise BadInput(f"hydra.sweeper.pruner must build an Optuna pruner; got {type(pruner).__name__}; "
                       f"fix: hydra/sweeper/pruner=median")
    return pruner


def staged_rule_applies(metric_names: Sequence[str] | None, directions: Sequence[str]) -> bool:
    """The probe rule needs a throughput and an accuracy metric, both maximized, and nothing else."""
    return metric_names is not None and len(metric_names) == 2 and set(metric_names) == {THROUGHPUT, ACCURACY} \
        and all(d == "maximize" for d in directions)


def throughput_bar(trials: Sequence[optuna.trial.FrozenTrial], margin: float, startup_trials: int = 1) -> float | None:
    """The probe throughput below which a new trial cannot reach the front, or
    None while fewer than `startup_trials` completed feasible trials have both
    metrics (the best accuracy of one or two trials is a poor bet to stop on).

    The bar is the highest throughput among the completed, feasible trials that
    hold the best accuracy seen so far, lowered by `margin` (the probe is short
    and noisy, and a trial's final throughput is the median of all its windows)."""
    done = []
    for t in trials:
        metrics = t.user_attrs.get("metrics", {})
        if t.state == TrialState.COMPLETE and is_feasible(t) and t.user_attrs.get("outcome", "ok") == "ok" \
                and math.isfinite(metrics.get(THROUGHPUT, math.nan)) and math.isfinite(metrics.get(ACCURACY, math.nan)):
            done.append(metrics)
    if not done or len(done) < startup_trials:
        return None
    best_accuracy = max(m[ACCURACY] for m in done)
    return max(m[THROUGHPUT] for m in done if m[ACCURACY] == best_accuracy) * (1.0 - margin)


def trial_overrides(study: optuna.Study, trial: optuna.Trial, mode: str, margin: float,
                    startup_trials: int = 1) -> list[str]:
    """The Hydra overrides that hand a trial its early-stopping instructions.

    A trial enqueued on purpose (a retry, the nightly incumbent's repeats, a
    warm start) runs to the end: a re-measurement that got slower is exactly
    what must be measured, not stopped. A configuration drawn to replace a
    repeat (search/sweep/no_repeat.py) is an ordinary proposal."""
    enqueued = "fixed_params" in study._storage.get_trial_system_attrs(trial._trial_id)
    if enqueued and REPLACES_ATTR not in trial.user_attrs:
        return []
    if mode == "staged":
        bar = throughput_bar(study.get_trials(deepcopy=False), margin, startup_trials)
        return [] if bar is None else [f"train.stop_below_samples_per_s={bar:.6g}"]
    if mode == "pruner":
        return [to_override("trial.optuna_study", study.study_name), f"trial.optuna_trial_number={trial.number}"]
    return []


def choose_mode(enabled: bool, metric_names: Sequence[str] | None, directions: Sequence[str],
                pruner: optuna.pruners.BasePruner) -> str:
    """'pruner', 'staged' or 'off'."""
    if not enabled:
        return "off"
    if len(directions) == 1:
        return "off" if isinstance(pruner, optuna.pruners.NopPruner) else "pruner"
    return "staged" if staged_rule_applies(metric_names, directions) else "off"


def describe_mode(mode: str, pruner: optuna.pruners.BasePruner, margin: float) -> str:
    if mode == "pruner":
        return f"early stopping: {type(pruner).__name__} on each trial's val_accuracy learning curve"
    if mode == "staged":
        return (f"early stopping: a trial whose throughput probe is more than {margin:.0%} below the fastest trial "
                f"with the best accuracy so far stops there (it cannot reach the Pareto front)")
    return "early stopping: off"


def intermediate_series(study: optuna.Study, trial: optuna.Trial) -> dict[str, list]:
    """The learning curve the trial reported to Optuna, as an MLflow series
    (name -> [(step, value, timestamp_ms)]): accuracy in a maximized study,
    error (1 - accuracy) in a minimized one, as the pruner saw it."""
    import time

    name = "early_stop_val_accuracy" if study.direction.name == "MAXIMIZE" else "early_stop_val_error"
    values = study._storage.get_trial(trial._trial_id).intermediate_values
    now_ms = int(time.time() * 1000)
    return {name: [(int(step), float(v), now_ms) for step, v in sorted(values.items())]} if values else {}

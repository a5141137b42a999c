"""Early stopping, decided per trial before it is launched.

Two modes, chosen from the metrics the study optimises (docs/early_stopping.md):

- **one metric** (e.g. throughput subject to `val_accuracy >= 0.97`):
  Optuna's pruner (`hydra/sweeper/pruner`) watches the trial's accuracy
  learning curve. The trial gets `trial.optuna_study` and
  `trial.optuna_trial_number` and reports to its own Optuna trial
  (search/trial/learning_curve.py).
- **two metrics, throughput and accuracy** (the default): Optuna's
  pruners refuse multi-objective studies, so a staged rule instead. The
  trial gets `train.stop_below_samples_per_s = T * (1 - margin)` and stops
  after its throughput probe when it is slower than that, T being
  - searching for the answer (`hydra.sweeper.search_for=answer`, the
    default, once the baseline's accuracy is known): the throughput of the
    fastest completed trial at the study's seed whose val_accuracy reaches
    the answer's floor. A slower trial cannot be the answer, whatever its
    accuracy, so no assumption is made about accuracy.
  - searching for the front (`search_for=front`, or before the baseline
    ran): the throughput of the fastest trial with the best accuracy seen so
    far, which dominates any slower trial under the assumption that no
    configuration beats the best accuracy seen so far.

A stopped trial (outcome `stopped_early`) is told to Optuna by `tell_stopped`:
what it measured, so the sampler learns from it instead of proposing it again
(docs/early_stopping.md says which telling the replay measured best).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import optuna
from hydra.utils import instantiate
from optuna.trial import TrialState

from search.errors import BadInput
from search.record import (ACCURACY, BASELINE, CONFIRM, OK, RUNNABLE, SEED_ATTR, THROUGHPUT, accuracy, is_feasible,
                           metrics, outcome, role)
from search.sweep.answer import spread
from search.sweep.roles import enqueued_as_asked
from search.sweep.space import to_override


STOPPED_TELLING = "infeasible"  # how tell_stopped tells a stopped trial; see STOPPED_TELLINGS


def tell_stopped(study: optuna.Study, trial: optuna.Trial, metrics: dict[str, float],
                 constraints: dict[str, float], directions: Sequence[str], telling: str | None = None) -> None:
    """Tell Optuna about a trial early stopping ended (outcome `stopped_early`, set by the caller), from the
    metrics it measured (its probe's throughput; the throughput of the windows that ran, failing that).

    - ``pruned``: PRUNED. Samplers learn nothing from it (GP and TPE read COMPLETE trials only).
    - ``infeasible`` (the default): COMPLETE with its probe throughput and the worst accuracy among the
      completed trials, and the ``runnable`` constraint (with every other constraint) violated: the
      sampler learns both that it is slow and that it gave no answer, and no report, front or best
      trial (Optuna's own, which skip infeasible trials) can take it for one.
    - ``worst``: the same values, constraints as measured: feasible. Dominated by the trial that set the bar,
      so never on Optuna's front, but Optuna's best trial in a one-metric study could be it; kept for the
      replay (scripts/bench/search_efficiency.py) only.
    In a study whose metrics are not throughput and accuracy (no staged rule), or without a probe figure,
    the trial is PRUNED."""
    from search.sweep.outcome import set_constraints
    from search.sweep.study import study_metrics

    telling = telling or STOPPED_TELLING
    probe = metrics.get("probe_throughput_samples_per_s", metrics.get(THROUGHPUT))
    values = _pessimistic_values(study, probe, study_metrics(study), directions)
    if telling == "pruned" or values is None:
        study.tell(trial, state=TrialState.PRUNED)
        return
    set_constraints(study, trial, {RUNNABLE: 1.0 if telling == "infeasible" else 0.0, **constraints})
    study.tell(trial, values)


STOPPED_TELLINGS = ("pruned", "infeasible", "worst")


def _pessimistic_values(study: optuna.Study, probe_throughput: float | None, metrics: list[str],
                        directions: Sequence[str]) -> list[float] | None:
    """[probe throughput, the worst accuracy of the completed trials that measured one], in the study's
    metric order; None when the study is not a throughput-and-accuracy study or nothing is known."""
    if probe_throughput is None or not math.isfinite(probe_throughput) \
            or not staged_rule_applies(metrics, directions):
        return None
    accuracies = [accuracy(t) for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                  if outcome(t, unrecorded=OK) == OK]
    accuracies = [a for a in accuracies if a is not None and math.isfinite(a)]
    known = {THROUGHPUT: probe_throughput, ACCURACY: min(accuracies) if accuracies else 0.0}
    return [known[m] for m in metrics]


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
        m = metrics(t)
        if t.state == TrialState.COMPLETE and is_feasible(t) and outcome(t, unrecorded=OK) == OK \
                and math.isfinite(m.get(THROUGHPUT, math.nan)) and math.isfinite(m.get(ACCURACY, math.nan)):
            done.append(m)
    if not done or len(done) < startup_trials:
        return None
    best_accuracy = max(m[ACCURACY] for m in done)
    return max(m[THROUGHPUT] for m in done if m[ACCURACY] == best_accuracy) * (1.0 - margin)


def _measured(t: optuna.trial.FrozenTrial) -> bool:
    return (t.state == TrialState.COMPLETE and is_feasible(t) and outcome(t, unrecorded=OK) == OK
            and math.isfinite(metrics(t).get(THROUGHPUT, math.nan)))


def at_floor(trials: Sequence[optuna.trial.FrozenTrial], floor: float) -> list[optuna.trial.FrozenTrial]:
    """The completed, feasible trials at the study's seed whose val_accuracy reaches `floor` (the baseline is
    one): those that could be the answer."""
    return [t for t in trials if _measured(t) and SEED_ATTR not in t.user_attrs
            and metrics(t).get(ACCURACY, -math.inf) >= floor]


def fastest_at_floor(trials: Sequence[optuna.trial.FrozenTrial], floor: float) -> optuna.trial.FrozenTrial | None:
    """The search's standing answer, as the live display shows it: the fastest trial `at_floor`, one measurement
    each (the confirmation's re-measurements left out: the answer is read from their medians); None while none."""
    return max((t for t in at_floor(trials, floor) if role(t) != CONFIRM), key=lambda t: metrics(t)[THROUGHPUT],
               default=None)


def answer_bar(trials: Sequence[optuna.trial.FrozenTrial], floor: float, margin: float) -> float | None:
    """The probe throughput below which a new trial cannot be the answer: the highest throughput `at_floor`,
    lowered by `margin`, or by the spread of the baseline's own runs when this machine showed more noise than
    that (the confirmation reads its noise the same way, search/sweep/confirm.py); None while none has."""
    speeds = [metrics(t)[THROUGHPUT] for t in at_floor(trials, floor)]
    return max(speeds) * (1.0 - max(margin, spread(baseline_throughputs(trials)))) if speeds else None


def baseline_throughputs(trials: Sequence[optuna.trial.FrozenTrial]) -> list[float]:
    """The throughput of each of your configuration's runs that ended ok: this machine's noise as the sweep saw it."""
    return [metrics(t)[THROUGHPUT] for t in trials if _measured(t) and role(t) == BASELINE]


def probe_bar(trials: Sequence[optuna.trial.FrozenTrial], margin: float, startup_trials: int,
              floor: float | None) -> float | None:
    """The answer's bar when `floor` is known (searching for the answer), else the front's."""
    return answer_bar(trials, floor, margin) if floor is not None else throughput_bar(trials, margin, startup_trials)


def trial_overrides(study: optuna.Study, trial: optuna.Trial, mode: str, margin: float,
                    startup_trials: int = 1, floor: float | None = None) -> list[str]:
    """The Hydra overrides that hand a trial its early-stopping instructions.

    A trial enqueued on purpose (a retry, the nightly incumbent's repeats, a
    warm start) runs to the end: a re-measurement that got slower is exactly
    what must be measured, not stopped. A configuration drawn to replace a
    repeat or one of the start design (search/sweep/roles.py) is a proposal. `floor`: the
    answer's accuracy floor when the sweep searches for the answer and knows it
    (the answer's bar then), else None (the front's)."""
    if enqueued_as_asked(study, trial):
        return []
    if mode == "staged":
        bar = probe_bar(study.get_trials(deepcopy=False), margin, startup_trials, floor)
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


def describe_mode(mode: str, pruner: optuna.pruners.BasePruner, margin: float, for_answer: bool = False) -> str:
    if mode == "pruner":
        return f"early stopping: {type(pruner).__name__} on each trial's val_accuracy learning curve"
    if mode == "staged" and for_answer:
        return (f"early stopping: a trial whose throughput probe is more than {margin:.0%} below the fastest trial "
                f"at your configuration's accuracy (minus the tolerance) stops there (it cannot be the answer)")
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

"""From what a job returned to what Optuna is told.

- `ok`: COMPLETE with the values of hydra.sweeper.metrics; every constraint told.
- `oom`, `infeasible`, or an `ok` trial that lacks one of those metrics
  (a time-to-accuracy trial that never reached its target): COMPLETE with
  placeholder values and the `runnable` constraint violated, so samplers
  learn the region and the trial never ranks as best.
- `stopped_early` (search/sweep/early_stopping.py tell_stopped): COMPLETE with its
  probe throughput and a pessimistic accuracy, `runnable` violated, so the
  sampler learns from it and it never ranks as best; PRUNED outside the
  two-metric staged rule.
- anything else (`diverged`, `crashed`, `timeout`): FAIL, with the reason.

Constraints are stored as one list in the trial's system attribute
`constraints` (`runnable` first, then hydra.sweeper.constraints in order),
with their names in the user attribute `search.constraints`. Optuna 5 reads
that list as it reads `trial.set_constraint`'s `constraints:<name>` keys
(`FrozenTrial.constraints`, numbered), and it is the form optuna-dashboard
(0.21) reads: written the other way, an infeasible trial there is a feasible
point at its placeholder values. TPE and NSGA-II read the values whatever
their names, so studies written either way (this package wrote names before)
mix; Optuna 5.1's GPSampler requires the same names on every trial, so the
sweep shows it each trial's values as one list (search/sweep/gp_view.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import optuna
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY
from optuna.trial import TrialState

from search.record import (CONSTRAINTS_ATTR, CRASHED, INFEASIBLE, INFEASIBLE_OUTCOMES, METRICS_ATTR, OK, OUTCOME_ATTR,
                           REASON_ATTR, RUNNABLE, STOPPED_EARLY)
from search.sweep.constraints import Constraint


@dataclass
class Scored:
    outcome: str
    reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)
    values: list[float] | None = None
    constraints: dict[str, float] = field(default_factory=dict)


def score(result: Any, metric_names: Sequence[str] | None, n_values: int,
          constraints: Sequence[Constraint]) -> Scored:
    if not isinstance(result, Mapping):  # a plain Hydra task returned a number or a list
        return _score_plain(result, n_values)
    metrics = {k: float(v) for k, v in result.get("metrics", result).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    scored = Scored(str(result.get("outcome", OK)), str(result.get("reason", "")), metrics,
                    {k: str(v) for k, v in result.get("info", {}).items()})
    if scored.outcome != OK:
        scored.constraints = _unmeasured(constraints)
        return scored
    missing = [k for k in metric_names or [] if not math.isfinite(metrics.get(k, math.nan))]
    if missing:
        scored.outcome = INFEASIBLE
        scored.reason = f"the trial reported no finite {', '.join(missing)}"
        scored.constraints = _unmeasured(constraints)
        return scored
    scored.values = [metrics[k] for k in metric_names or []]
    if len(scored.values) != n_values:
        return Scored(CRASHED, f"expected {n_values} values (one per metric), got {len(scored.values)}", metrics)
    scored.constraints = {str(c): c.violation(metrics) for c in constraints}
    return scored


def _unmeasured(constraints: Sequence[Constraint]) -> dict[str, float]:
    """A trial that measured nothing violates every rule too: GPSampler refuses a
    study whose COMPLETE trials carry different sets of constraints."""
    return {str(c): 1.0 for c in constraints}


def _score_plain(result: Any, n_values: int) -> Scored:
    try:
        values = [float(result)] if isinstance(result, (int, float)) else [float(v) for v in result]
    except (TypeError, ValueError):
        return Scored(CRASHED, f"the task returned {type(result).__name__}, not numbers or a metrics dict")
    if len(values) != n_values or not all(math.isfinite(v) for v in values):
        return Scored(CRASHED, f"expected {n_values} finite values (one per metric), got {values}")
    return Scored(OK, values=values)


def tell(study: optuna.Study, trial: optuna.Trial, scored: Scored, directions: Sequence[str]) -> None:
    trial.set_user_attr(OUTCOME_ATTR, scored.outcome)
    trial.set_user_attr(REASON_ATTR, scored.reason)
    trial.set_user_attr(METRICS_ATTR, scored.metrics)
    if scored.values is not None:
        set_constraints(study, trial, {RUNNABLE: 0.0, **scored.constraints})
        study.tell(trial, scored.values)
    elif scored.outcome == STOPPED_EARLY:  # what its probe measured, so the sampler learns (early_stopping.py)
        from search.sweep.early_stopping import tell_stopped

        tell_stopped(study, trial, scored.metrics, scored.constraints, directions)
    elif scored.outcome in INFEASIBLE_OUTCOMES:
        set_constraints(study, trial, {RUNNABLE: 1.0, **scored.constraints})
        study.tell(trial, [0.0 if d == "maximize" else math.inf for d in directions])
    else:
        study.tell(trial, state=TrialState.FAIL)


def set_constraints(study: optuna.Study, trial: optuna.Trial, values: dict[str, float]) -> None:
    """The constraint values as one list (the form Optuna's own `constraints_func` writes, and
    optuna-dashboard reads), their names as a user attribute; see the module's docstring."""
    trial.set_user_attr(CONSTRAINTS_ATTR, values)
    study._storage.set_trial_system_attr(trial._trial_id, _CONSTRAINTS_KEY, list(values.values()))

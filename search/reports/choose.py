"""Pick a configuration from a study by a rule the user states:
"fastest (`throughput_samples_per_s`, maximize) with `val_accuracy >= 0.9`".

Trials are grouped by configuration (their knob values): a nightly sweep
measures its incumbent several times, and one lucky window must not win, so a
configuration's figures are the medians over its `ok`, feasible trials.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import optuna
from optuna.trial import TrialState

from search.sweep.constraints import Constraint
from search.sweep.outcome import is_feasible


@dataclass
class Candidate:
    params: dict[str, Any]
    trials: list[optuna.trial.FrozenTrial] = field(default_factory=list)

    @property
    def metrics(self) -> dict[str, float]:
        """Median of every metric over the configuration's trials."""
        names = {k for t in self.trials for k in t.user_attrs.get("metrics", {})}
        return {k: statistics.median(t.user_attrs["metrics"][k] for t in self.trials
                                     if k in t.user_attrs.get("metrics", {})) for k in sorted(names)}

    def values(self, metric: str) -> list[float]:
        return [float(t.user_attrs["metrics"][metric]) for t in self.trials
                if metric in t.user_attrs.get("metrics", {})]


def key(params: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def measured_ok(trial: optuna.trial.FrozenTrial) -> bool:
    return (trial.state == TrialState.COMPLETE and trial.user_attrs.get("outcome") == "ok"
            and is_feasible(trial))


def candidates(trials: Iterable[optuna.trial.FrozenTrial]) -> list[Candidate]:
    """One candidate per configuration among the trials that ran, finished `ok` and are feasible."""
    groups: dict[tuple, Candidate] = {}
    for t in trials:
        if measured_ok(t):
            groups.setdefault(key(t.params), Candidate(dict(t.params))).trials.append(t)
    return list(groups.values())


def ranked(cands: Sequence[Candidate], metric: str, maximize: bool = True,
           where: Sequence[Constraint] = ()) -> list[Candidate]:
    """Candidates that satisfy every rule and report `metric`, best first."""
    kept = [c for c in cands if metric in c.metrics and all(r.violation(c.metrics) <= 0 for r in where)]
    return sorted(kept, key=lambda c: c.metrics[metric], reverse=maximize)


def best(cands: Sequence[Candidate], metric: str, maximize: bool = True,
         where: Sequence[Constraint] = ()) -> Candidate | None:
    order = ranked(cands, metric, maximize, where)
    return order[0] if order else None

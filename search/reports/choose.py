"""Pick a configuration from a study by a rule the user states:
"fastest (`throughput_samples_per_s`, maximize) with `val_accuracy >= 0.9`".

Trials are grouped by configuration (their knob values): a nightly sweep
measures its incumbent several times, and one lucky window must not win, so a
configuration's figures are the medians over its `ok`, feasible trials at the
study's seed (what a throughput-only run cannot say, from its whole runs).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import optuna
from optuna.trial import TrialState

from search.record import ACCURACY_FROM_ATTR, OK, SEED_ATTR, is_feasible, metrics, outcome
from search.sweep.constraints import Constraint
from search.sweep.staging import INHERITED, RUN_LENGTH_METRICS


@dataclass
class Candidate:
    params: dict[str, Any]
    trials: list[optuna.trial.FrozenTrial] = field(default_factory=list)

    @property
    def metrics(self) -> dict[str, float]:
        """Median of every metric over the configuration's trials. A throughput-only run (search/sweep/staging.py:
        the confirmation's rounds, a staged proposal) counts for what its timed windows measure; its accuracy is
        a copy of a whole run's, and how long it ran is not the configuration's: those come from the
        configuration's whole runs (the accuracy from the copies when it has none)."""
        whole = [t for t in self.trials if ACCURACY_FROM_ATTR not in t.user_attrs]
        out: dict[str, float] = {}
        for k in sorted({k for t in self.trials for k in metrics(t)}):
            runs = whole if k in RUN_LENGTH_METRICS else (whole or self.trials) if k in INHERITED else self.trials
            values = [metrics(t)[k] for t in runs if k in metrics(t)]
            if values:
                out[k] = statistics.median(values)
        return out

    def values(self, metric: str) -> list[float]:
        return [float(metrics(t)[metric]) for t in self.trials if metric in metrics(t)]


def key(params: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def measured_ok(trial: optuna.trial.FrozenTrial) -> bool:
    return trial.state == TrialState.COMPLETE and outcome(trial) == OK and is_feasible(trial)


def candidates(trials: Iterable[optuna.trial.FrozenTrial]) -> list[Candidate]:
    """One candidate per configuration among the trials that ran at the study's seed, finished `ok` and are
    feasible. A run at another seed (the baseline's second, the answer's second-seed check) is another draw of
    the configuration's accuracy, compared only with runs at that seed (search/sweep/confirm.py), as the front
    table leaves it out (search/reports/tables.py)."""
    groups: dict[tuple, Candidate] = {}
    for t in trials:
        if measured_ok(t) and SEED_ATTR not in t.user_attrs:
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

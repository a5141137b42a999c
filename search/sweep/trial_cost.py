"""What this study's trials cost, in seconds: one trial's wall time, the median of a kind (timed only or
trained in full), and what a timed-only run costs as a share of a full training.

The confirmation plans its rounds with these (search/sweep/confirm.py), and the GP's pick weighs what a
configuration would cost against what it could gain (search/sweep/per_second.py).
"""
from __future__ import annotations

import statistics
from typing import Callable

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.record import ACCURACY_FROM_ATTR, OK, ended_unix_s, launched_unix_s, metrics, outcome

# A timed-only run's share of a full training before the study has run one of each: the default CPU sweep's runs
# measured 0.3-0.5 (1.5-2.1 s against 3.7-6.3 s, 2026-12-02), and a larger share only weighs cost less.
TIMED_ONLY_SHARE_PRIOR = 0.5


def wall_s(t: FrozenTrial) -> float:
    """The trial's seconds from its launch to its end (the trial loop's stamps), else its run's own trial_wall_s."""
    a, b = launched_unix_s(t), ended_unix_s(t)
    if a is not None and b is not None:
        return float(b) - float(a)
    return float(metrics(t).get("trial_wall_s", 0.0))


def ran_ok(study: optuna.Study, throughput_only: bool,
           where: Callable[[FrozenTrial], bool] | None = None) -> list[FrozenTrial]:
    """The trials of that kind (timed only, or trained in full) that ended ok with a wall time (and `where`)."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if (ACCURACY_FROM_ATTR in t.user_attrs) == throughput_only and outcome(t) == OK
            and wall_s(t) > 0 and (where is None or where(t))]


def median_s(study: optuna.Study, throughput_only: bool) -> float:
    """A trial's expected wall time: the median of this study's trials of that kind (timed only: of its full
    trainings while none was only timed); 0 with none."""
    done = ran_ok(study, throughput_only)
    if not done and throughput_only:
        return median_s(study, False)
    return statistics.median(wall_s(t) for t in done) if done else 0.0


def timed_only_share(study: optuna.Study) -> float:
    """A timed-only run's median seconds over a full training's, in this study (between 0.05 and 1);
    TIMED_ONLY_SHARE_PRIOR until it has run one of each."""
    timed, full = ran_ok(study, True), ran_ok(study, False)
    if not timed or not full:
        return TIMED_ONLY_SHARE_PRIOR
    share = statistics.median(wall_s(t) for t in timed) / statistics.median(wall_s(t) for t in full)
    return min(1.0, max(0.05, share))

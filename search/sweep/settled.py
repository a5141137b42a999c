"""Configurations the answer is settled for: their maths trained to the end below the accuracy floor.

Searching for the answer (the default), a configuration whose maths (every
swept knob but the speed-only ones, search/sweep/staging.py) already trained
to the end at the study's seed with a val_accuracy below the floor cannot be
the answer, however fast it runs: staging scores it with that same accuracy.
Timing it would spend a trial (a timed-only run, about 2 s on the default
CPU space) on a figure no answer can use, so the sampler wrapper
(search/sweep/rule_sampler.py) counts such a configuration as run and moves
the proposal to the nearest one that could still be the answer, as it does
for a repeat. In two default CPU sweeps of 2026-12-01 the GP spent 0 and 3
of its 20 trials on loader and thread settings of `model_pruning.ratio=0.5`
(val_accuracy 0.964 against a floor of 0.973).

It applies only where staging does (`hydra.sweeper.staging=false` trains every
configuration, so nothing is settled by another's run) and once the floor is
known; the two-objective front loses those configurations' points, as it does
a trial early stopping ended. `at_floor` names the other side, the maths
that trained at the floor: an unseen configuration of one is only timed and
can be the answer, so a repair takes it first (search/sweep/rule_sampler.py).
"""
from __future__ import annotations

from typing import Callable

import optuna
from optuna.trial import TrialState

from search.record import ACCURACY, metrics
from search.sweep.baseline import accuracy_floor
from search.sweep.no_repeat import Resolved, trial_key
from search.sweep.staging import maths_of, trained_fully

Settled = Callable[[optuna.Study], frozenset]  # maths (maths_of) read off the study: below_floor's, at_floor's


def below_floor(tolerance: float, resolved: Resolved | None = None) -> Settled:
    """The study's maths that trained to the end at its seed below the floor (the baseline's val_accuracy less
    `tolerance`); none while the floor is unknown."""
    return _trained(tolerance, resolved, below=True)


def at_floor(tolerance: float, resolved: Resolved | None = None) -> Settled:
    """The study's maths that trained to the end at its seed at or above the floor: a configuration of one of
    them that has not run is only timed (staging) and can be the answer, the cheapest trial a repair can pick
    (search/sweep/rule_sampler.py); none while the floor is unknown."""
    return _trained(tolerance, resolved, below=False)


def _trained(tolerance: float, resolved: Resolved | None, below: bool) -> Settled:
    known: dict[tuple, frozenset] = {}  # the last answer, by the study's finished trials and floor

    def maths(study: optuna.Study) -> frozenset:
        floor = accuracy_floor(study, tolerance)
        if floor is None:
            return frozenset()
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        mark = (study._study_id, len(done), floor)
        if mark not in known:
            known.clear()
            known[mark] = frozenset(maths_of(trial_key(t, resolved)) for t in done if trained_fully(t)
                                    and (metrics(t)[ACCURACY] < floor) == below)
        return known[mark]
    return maths

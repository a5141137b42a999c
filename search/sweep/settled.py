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

A configuration enqueued before its maths was known (a move of the start
design, search/sweep/start_design.py, or its halfway-back move) does not go
through the sampler: when its turn comes with its maths settled, it is closed
as skipped, with no run (`skip_if_settled`), and the next trial runs. Seen in
a default sweep of 2026-12-02: the halfway-back move `batch_size=128` came
after `parallel.devices=2` had trained global batch 128 to 0.8747 (floor
0.9727), and was timed for 3.1 s where, a new maths, its probe had stopped
it in 2.3 s.

It applies only where staging does (`hydra.sweeper.staging=false` trains every
configuration, so nothing is settled by another's run) and once the floor is
known; the two-objective front loses those configurations' points, as it does
a trial early stopping ended.
"""
from __future__ import annotations

from typing import Callable

import optuna
from optuna.trial import TrialState

from search.sweep.answer import ACCURACY
from search.sweep.baseline import accuracy_floor
from search.sweep.no_repeat import Resolved, configuration_key
from search.sweep.staging import ACCURACY_FROM_ATTR, maths_of, splits_one_batch, trained_fully
from search.sweep.start_design import COMBINED_ATTR, HALFWAY_ATTR, START_ATTR

SETTLED_ATTR = "search.settled_by"  # on a skipped enqueued trial: the trial whose maths trained below the floor

Settled = Callable[[optuna.Study], frozenset]  # the maths (maths_of) the answer is settled for


def below_floor(tolerance: float, resolved: Resolved | None = None) -> Settled:
    """The study's maths that trained to the end at its seed below the floor (the baseline's val_accuracy less
    `tolerance`); none while the floor is unknown."""
    def settled(study: optuna.Study) -> frozenset:
        floor = accuracy_floor(study, tolerance)
        if floor is None:
            return frozenset()
        split = splits_one_batch(study)
        return frozenset(maths_of(configuration_key(t.params, resolved), split)
                         for t in study.get_trials(deepcopy=False) if trained_fully(t)
                         and t.user_attrs["metrics"][ACCURACY] < floor)
    return settled


def skip_if_settled(study: optuna.Study, trial: optuna.Trial, floor: float | None) -> bool:
    """Close `trial`, a start trial (a move, its halfway-back move or a combination, search/sweep/start_design.py)
    about to be timed for the accuracy of an earlier trial's maths (staging's `search.accuracy_from`), as skipped
    when that accuracy is below `floor`: it cannot be the answer. False (nothing done) for any other trial (the
    sampler's are repaired before they are asked, rule_sampler.py), and while the floor is unknown."""
    source = trial.user_attrs.get(ACCURACY_FROM_ATTR)
    if floor is None or source is None or not any(a in trial.user_attrs for a in (START_ATTR, HALFWAY_ATTR,
                                                                                  COMBINED_ATTR)):
        return False
    accuracy = study.get_trials(deepcopy=False)[int(source)].user_attrs.get("metrics", {}).get(ACCURACY)
    if accuracy is None or accuracy >= floor:
        return False
    trial.set_user_attr(SETTLED_ATTR, int(source))
    trial.set_user_attr("outcome", "skipped")
    trial.set_user_attr("reason", f"its maths trained to val_accuracy {accuracy:.4f} in trial {source}, below the "
                                  f"floor {floor:.4f}: it cannot be the answer, so it is not timed")
    study.tell(trial, state=TrialState.FAIL)
    return True

"""The search's patience: it ends once the sampler's proposals stop making the answer faster and no
one-knob move from the answer so far is left that could beat it.

Searching for the answer, the trials enqueued on purpose come first: your
configuration's runs, the practitioner's recipe, the start design's
one-knob moves (search/sweep/policies.py). After them the search ends once
`hydra.sweeper.patience_trials` trials the sampler proposed (not enqueued),
launched since this sweep started, have ended in a row without making the
fastest configuration at the floor faster by more than noise (the
confirmation's window: 10%, or the spread of your configuration's own runs
when wider, search/sweep/answer.py noise_window), and every one-knob move
from that fastest configuration has been measured or cannot beat it
(`moves_left`). A move cannot beat it when it breaks a rule, when its maths
trained below the floor (staging would score it so), when it moves only a
knob that changes the maths but not the work (the learning rate: the same
work runs at the same speed), when it has no effect here, or when a smaller
batch of the same configuration ran out of memory. Any trial that makes the
answer faster starts the count again, and moves the moves with it.
`patience_trials=null` runs every one of `n_trials`.

Counted from this sweep's start, so a sweep run again on the same study
(to search more) gives the sampler that many proposals again. Trials that
other workers of the study launched since count too: they search the same
study.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from objectives.knobs import WORK_NEUTRAL
from search.record import ACCURACY, ROLE_ATTR, THROUGHPUT
from search.sweep.answer import noise_window
from search.sweep.early_stopping import at_floor, baseline_throughputs, fastest_at_floor
from search.sweep.no_repeat import configuration_key, trial_key
from search.sweep.staging import maths_of, trained_fully


def noise_of(trials: Sequence[optuna.trial.FrozenTrial]) -> float:
    """The confirmation's window (noise_window) over your configuration's runs among `trials`."""
    return noise_window(baseline_throughputs(trials))


def proposed(trial: optuna.trial.FrozenTrial) -> bool:
    """Proposed by the sampler, not enqueued (the baseline, the start design, a retry, nightly's runs)."""
    return "fixed_params" not in trial.system_attrs


def stale_proposals(study: optuna.Study, floor: float, since_unix_s: float) -> int:
    """How many of the sampler's proposals launched since `since_unix_s` ended, last in a row, without making
    the fastest configuration at `floor` faster beyond noise (noise_of)."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return _stale(trials, floor, since_unix_s, noise_of(trials))


def _stale(trials: Sequence[optuna.trial.FrozenTrial], floor: float, since_unix_s: float, noise: float) -> int:
    ended = sorted(trials, key=lambda t: t.datetime_complete.timestamp() if t.datetime_complete else math.inf)
    best = reference = None
    count = 0
    for t in ended:
        if at_floor([t], floor) and t.user_attrs.get(ROLE_ATTR) != "confirm":
            speed = t.user_attrs["metrics"][THROUGHPUT]
            best = speed if best is None else max(best, speed)
        if best is not None and (reference is None or best > reference * (1.0 + noise)):
            reference, count = best, 0  # progress, whoever made it
        elif proposed(t) and t.datetime_start is not None and t.datetime_start.timestamp() >= since_unix_s:
            count += 1
    return count


def search_ended(study: optuna.Study, floor: float | None, patience_trials: int | None,
                 since_unix_s: float, space: Any = None) -> str | None:
    """Why the search ends here for want of progress (a line), or None: go on. `space` (search/sweep/space.py
    Space): the search goes on while a one-knob move from the fastest configuration at the floor is left
    (moves_left); None: not checked."""
    if patience_trials is None or floor is None:
        return None
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    noise = noise_of(trials)
    count = _stale(trials, floor, since_unix_s, noise)
    if count < patience_trials or (space is not None and moves_left(study, floor, space)):
        return None
    return (f"the sampler's last {count} trials did not make the fastest configuration at your accuracy faster "
            f"by more than noise ({noise:.0%}), and every one-knob move from it has run or cannot beat it "
            f"(hydra.sweeper.patience_trials={patience_trials}; null runs every trial of n_trials)")


def values_of(dist: BaseDistribution) -> list[Any]:
    """The values a knob can take, when they can be listed (a float range cannot: none)."""
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    if isinstance(dist, IntDistribution) and (dist.high - dist.low) // dist.step < 64:
        return list(range(dist.low, dist.high + 1, dist.step))
    return []


def moves_left(study: optuna.Study, floor: float, space: Any) -> list[dict[str, Any]]:
    """The one-knob moves from the fastest configuration at `floor` that have not run (nor run now, nor wait to)
    and could still beat it (the module's docstring says which cannot), in the space's order."""
    trials = study.get_trials(deepcopy=False)
    best = fastest_at_floor(trials, floor)
    if best is None:
        return []
    runs = space.runs_as
    seen = {trial_key(t, runs) for t in trials if t.params and t.state != TrialState.FAIL}
    seen |= {configuration_key(p, runs) for t in trials if t.state == TrialState.WAITING
             and (p := study._storage.get_trial_system_attrs(t._trial_id).get("fixed_params"))}
    below = {maths_of(trial_key(t, runs)) for t in trials
             if trained_fully(t) and t.user_attrs["metrics"][ACCURACY] < floor}
    too_big = [t.params for t in trials if t.user_attrs.get("outcome") == "oom" and "batch_size" in t.params]
    here = runs(best.params)
    left = []
    for knob, dist in space.distributions.items():
        if knob in WORK_NEUTRAL or knob not in best.params:
            continue
        for value in values_of(dist):
            move = {**best.params, knob: value}
            key = configuration_key(move, runs)
            if value == best.params[knob] or key in seen or runs(move) == here or maths_of(key) in below \
                    or space.broken_rule(move) is not None or _out_of_memory(move, too_big):
                continue
            left.append(move)
    return left


def _out_of_memory(params: Mapping[str, Any], too_big: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the same configuration at a batch no larger ran out of memory (a batch needs more as it grows)."""
    return any(all(p.get(k) == v for k, v in params.items() if k != "batch_size")
               and _number(p["batch_size"]) <= _number(params["batch_size"]) for p in too_big)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.inf

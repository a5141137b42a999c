"""The search's patience: it ends once the sampler's own proposals stop making the answer faster.

Searching for the answer, the trials enqueued on purpose come first: your
configuration's runs, the start design's one-knob moves, the moves taken
halfway back and the moves that paid combined (search/sweep/start_design.py,
start_combination.py). Replayed with this rule on the four measured grids
(scripts/bench/search_efficiency.py, 30 seeds each), every replay still
reached the target in as many trials as without it; in two default CPU
sweeps of 2026-12-06 the GP's proposals after them trained 6 and 3 new sets
of maths in full below the accuracy floor (22 and 11 s of 81 and 76 s) and never made the answer
faster beyond noise. So the search ends once `hydra.sweeper.patience_trials`
trials the sampler proposed (not enqueued), launched since this sweep
started, have ended in a row without making the fastest configuration at
the floor faster by more than noise: the confirmation's window (10%, or
the spread of your configuration's own runs when wider,
search/sweep/answer.py noise_window), within which the search's one
measurement each cannot tell configurations apart anyway. Any trial that does make it faster
starts the count again. `patience_trials=null` runs every one of `n_trials`.

What it costs: a configuration the GP would have found only after three
proposals that did not pay is not found. In three default sweeps beside the
code before (docs/BENCHMARKS.md, 2026-12-06) the whole sweep took 22% less time
and every answer's interval overlapped the code before's, but one sweep
answered without bf16 where the code before's had it (its start had
combined bf16 with loader workers, this one's probe read bf16 just under
your configuration's speed).

Counted from this sweep's start, so a sweep run again on the same study
(to search more) gives the sampler that many proposals again. Trials that
other workers of the study launched since count too: they search the same
study.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import optuna
from optuna.trial import TrialState

from search.record import ROLE_ATTR, THROUGHPUT
from search.sweep.answer import noise_window
from search.sweep.early_stopping import at_floor, baseline_throughputs


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
                 since_unix_s: float) -> str | None:
    """Why the search ends here for want of progress (a line), or None: go on."""
    if patience_trials is None or floor is None:
        return None
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    noise = noise_of(trials)
    count = _stale(trials, floor, since_unix_s, noise)
    if count < patience_trials:
        return None
    return (f"the sampler's last {count} trials did not make the fastest configuration at your accuracy faster "
            f"by more than noise ({noise:.0%}; hydra.sweeper.patience_trials={patience_trials}, null runs every "
            f"trial of n_trials)")

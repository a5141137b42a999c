"""After the start design: a move that went too far taken halfway back, then the moves that paid combined
one at a time, as an engineer would by hand.

Halfway back: a start move that was faster than your configuration but fell below the accuracy floor (model
pruning to its far end, 0.75: faster, 1.7 points less accurate) is run once more at the value halfway between
yours and the move's (the middle choice in the order the GP sees them; the middle of a range, geometric on a log
scale), a knob at a time. So is one faster than yours that early stopping ended at its probe (slower than a move
at the floor, its accuracy unknown): the speed-only moves run first and raise the bar (start_design.py), so a
move that went too far is often stopped before its accuracy is known, and the combination that measures it may
need the gentler value (digits_long_grid: batch_size=256 stopped, 128 the answer's). It is a move like the
others from then on.

The start design (search/sweep/start_design.py) measures each knob moved alone from your configuration. The
moves that were faster than your configuration and kept its accuracy (at least the floor: its accuracy less
`hydra.sweeper.accuracy_tolerance`) are then combined greedily, fastest first: the fastest move, plus the
next one; kept when that was faster still at the floor, dropped otherwise; then the next one, and so on. A
combination is one trial, proposed before the sampler's, and the GP learns from it like from any trial. Two
moves that each pay may not pay together (loader workers and intra-op threads on two cores: each faster
alone, slower together), which is why each is added on its own and kept only when it pays.

Stateless: the next combination is read from the study's trials each time (a resumed or killed sweep goes on
where the study is), keyed by the configuration, so a combination that ran before, or a start move that is one,
is not run again; one that is waiting or running holds the next until it ended. A combination stopped early,
failed or infeasible did not pay. `hydra.sweeper.start_combination=false` leaves both to the sampler.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from search.record import (ACCURACY, BASELINE, COMBINED_ATTR, HALFWAY_ATTR, OK, START_ATTR, STOPPED_EARLY, THROUGHPUT,
                           metrics, move_of, outcome, role)
from search.reports.choose import key
from search.sweep.start_design import _is_number

PROBE = "probe_throughput_samples_per_s"


def _measured(trial: FrozenTrial) -> tuple[float, float | None] | None:
    """A trial's throughput and accuracy when it ran ok (a timed-only trial's accuracy is its maths' run's), or
    its probe's throughput and no accuracy when early stopping ended it (faster than your configuration, slower
    than the best so far); None otherwise."""
    m = metrics(trial)
    if trial.state != TrialState.COMPLETE:
        return None
    if outcome(trial) == OK and THROUGHPUT in m:
        return m[THROUGHPUT], m.get(ACCURACY)
    if outcome(trial) == STOPPED_EARLY and (PROBE in m or THROUGHPUT in m):
        return m.get(PROBE, m.get(THROUGHPUT)), None
    return None


def _baseline(trials: Sequence[FrozenTrial]) -> tuple[float, dict] | None:
    """Your configuration's median throughput over its runs that ended ok, and its knob values; None until one
    has. Every run counts, the one at the second seed too: the seed changes the maths' draws, not the speed,
    and one run alone is as noisy as the machine. Against your first run alone, on a 2-core VM whose two runs
    of your configuration read 715 and 1,155 samples/s (a default sweep of 2026-12-02), `batch_size=256` (775)
    and `=128` (779) "paid", and their combinations with `loader.num_workers=2` trained in full below the floor
    (7 s each); against the median (935) neither pays."""
    runs = [t for t in trials if role(t) == BASELINE
            and (m := _measured(t)) is not None and m[1] is not None]
    return (statistics.median(_measured(t)[0] for t in runs), runs[0].params) if runs else None


def _halfway(dist: BaseDistribution, base: Any, moved: Any) -> Any | None:
    """The value halfway between your value and the move's as the GP sees the knob: the middle choice in their
    order, the middle of a range (geometric on a log scale, on the step's grid); None when none lies between or
    the values are not numbers."""
    numbers = _is_number(base) and _is_number(moved)
    if isinstance(dist, CategoricalDistribution):
        if not numbers or not all(_is_number(c) for c in dist.choices):
            return None
        ranked = sorted(dist.choices)
        if base not in ranked or moved not in ranked:
            return None
        low, high = sorted((ranked.index(base), ranked.index(moved)))
        return ranked[(low + high + 1) // 2] if high - low >= 2 else None
    if not numbers or not isinstance(dist, (IntDistribution, FloatDistribution)):
        return None
    middle = math.sqrt(base * moved) if dist.log and base > 0 and moved > 0 else (base + moved) / 2
    step = dist.step
    if step is not None:
        middle = dist.low + round((middle - dist.low) / step) * step
    value = int(round(middle)) if isinstance(dist, IntDistribution) else float(middle)
    return value if min(base, moved) < value < max(base, moved) else None


def next_halfway(trials: Sequence[FrozenTrial], floor: float | None, distributions: Mapping[str, BaseDistribution],
                 forbids: Callable[[Mapping[str, Any]], Any] | None = None,
                 from_stopped: bool = True) -> tuple[str, dict, bool] | None:
    """(knob, configuration, whether the move was stopped early) of a move to run halfway back: a start move that
    was faster than your configuration and fell below the floor, or (`from_stopped`) was stopped early with its
    accuracy unknown, to the choice halfway between (the far end of model pruning loses accuracy, the middle may
    not); None when none is left."""
    if floor is None or (yours := _baseline(trials)) is None:
        return None
    baseline_speed, base = yours
    tried = {key(t.params) for t in trials if t.params}
    for t in trials:
        knob, m = t.user_attrs.get(START_ATTR), _measured(t)
        if knob is None or m is None or m[0] <= baseline_speed or (m[1] is None and not from_stopped) \
                or (m[1] is not None and m[1] >= floor):
            continue
        value = _halfway(distributions[knob], base.get(knob), t.params.get(knob)) if knob in distributions else None
        candidate = {**base, knob: value}
        if value is not None and key(candidate) not in tried and (forbids is None or forbids(candidate) is None):
            return knob, candidate, m[1] is None
    return None


def next_combination(trials: Sequence[FrozenTrial], floor: float | None,
                     forbids: Callable[[Mapping[str, Any]], Any] | None = None) -> tuple[list[str], dict] | None:
    """(the knobs it moves, the configuration) of the next combination to run, or None: none left, fewer than
    two moves paid, a start move or a combination not ended yet, or the floor not known yet."""
    if floor is None or any(t.state in (TrialState.WAITING, TrialState.RUNNING) and move_of(t) is not None
                            for t in trials):
        return None
    if (yours := _baseline(trials)) is None:
        return None
    baseline_speed = yours[0]
    # A move stopped early had its probe faster than your configuration's runs and its accuracy unknown: the
    # combination trains in full and measures it.
    paid = sorted(((m[0], t.user_attrs.get(START_ATTR) or t.user_attrs[HALFWAY_ATTR], t.params) for t in trials
                   if (START_ATTR in t.user_attrs or HALFWAY_ATTR in t.user_attrs) and (m := _measured(t)) is not None
                   and m[0] > baseline_speed and (m[1] is None or m[1] >= floor)), key=lambda p: -p[0])
    if len(paid) < 2:
        return None
    ran: dict[tuple, list[FrozenTrial]] = {}
    for t in trials:
        if t.params:
            ran.setdefault(key(t.params), []).append(t)
    speed, knob, current = paid[0]
    knobs = [knob]
    for _, knob, params in paid[1:]:
        candidate = {**current, knob: params[knob]}
        if forbids is not None and forbids(candidate) is not None:
            continue
        runs = ran.get(key(candidate))
        if not runs:
            return knobs + [knob], candidate
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in runs):
            return None  # another worker runs it: the next step waits for its result
        paying = [m[0] for t in runs if (m := _measured(t)) is not None and m[1] is not None and m[1] >= floor]
        if paying and max(paying) > speed:
            speed, current, knobs = max(paying), candidate, knobs + [knob]
    return None


def enqueue_next(study: optuna.Study, floor: float | None,
                 forbids: Callable[[Mapping[str, Any]], Any] | None = None,
                 distributions: Mapping[str, BaseDistribution] | None = None,
                 halfway_from_stopped: bool = True) -> str | None:
    """Enqueue the next move halfway back (next_halfway; only given the space's `distributions`), else the next
    combination (next_combination), when nothing else waits to run, so that it is the very next proposal (one left
    waiting when the search ends would be set aside at the confirmation, and run as a trial of the next sweep);
    the line that says so (the first combination's names the setting that turns them off), or None."""
    trials = study.get_trials(deepcopy=False)
    if any(t.state in (TrialState.WAITING, TrialState.RUNNING) and HALFWAY_ATTR in t.user_attrs for t in trials) \
            or any(t.state == TrialState.WAITING for t in trials):
        return None
    back = next_halfway(trials, floor, distributions, forbids, halfway_from_stopped) if distributions else None
    if back is not None:
        knob, params, stopped = back
        study.enqueue_trial(params, user_attrs={HALFWAY_ATTR: knob}, skip_if_exists=False)
        why = ("stopped early, slower than the fastest at your accuracy, its own accuracy unknown" if stopped
               else "fell below your accuracy")
        return f"start: {knob}={params[knob]}, halfway back from a move that was faster than yours and {why}"
    if (step := next_combination(trials, floor, forbids)) is None:
        return None
    knobs, params = step
    first = not any(COMBINED_ATTR in t.user_attrs for t in trials)
    study.enqueue_trial(params, user_attrs={COMBINED_ATTR: ",".join(knobs)}, skip_if_exists=False)
    return (f"start: the moves that paid, combined: {', '.join(f'{k}={params[k]}' for k in knobs)}"
            + (" (hydra.sweeper.start_combination=false leaves it to the sampler)" if first else ""))

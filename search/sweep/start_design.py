"""The sweep's first proposals: each knob moved alone from the user's configuration.

When a study's baseline is first enqueued, it also gets one trial per swept
knob: the baseline with that knob alone set to the value farthest from the
baseline's (the other end of a numeric knob's choices or range, in the order
the GP sees them, and both ends when the baseline's value is in the middle;
for choices that are not numbers, another one drawn with the sweep's seed),
the speed-only knobs' moves first (they are timed only, at your accuracy, and
raise early stopping's bar for the moves after them: speed_only_first), then
the others, each in the space's order. The GP (the default sampler) then starts from
each knob's own effect on throughput and on accuracy, measured against the
user's configuration, instead of from random configurations in which every
knob moved at once.

They are proposals in every other way: they count in `n_trials`, early
stopping stops them like any trial, and one that moved only a speed-only
knob is timed only (search/sweep/staging.py). A knob whose moved
configuration breaks one of the space's rules (for choices that are not
numbers: that none of the others can take) is left to the sampler, and so
is a knob the baseline leaves without effect (persistent workers when it
loads without workers). Nor is a knob that changes the maths but not the
work a step does (the learning rate: KNOB.work_neutral): alone it runs at
your configuration's speed, so it can never be the faster configuration the
start looks for, only make room in accuracy for one that is; the GP moves
it with the others.
`hydra.sweeper.start_design=sampler` leaves the start to the sampler (its
own start-up trials, random for the GP), as do `search_for=front` and every
sampler but the GP (STARTS_FROM_DESIGN): random, grid and quasi-random
sampling have a design of their own, and TPE did better from its own random
start. Measured by replay on two grids in docs/BENCHMARKS.md (Search
efficiency).
"""
from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from objectives.knobs import SPEED_ONLY, WORK_NEUTRAL
from search.record import DEFERRED_ATTR, START_ATTR

# The samplers the start design was measured to help (docs/BENCHMARKS.md, Search efficiency): the GP. Replayed
# with it, TPE needed more trials than from its own random start (median 27.5 against 24.0 and 40 against 35.5
# on the two grids, 30 seeds); random, grid and quasi-random sampling have a design of their own.
STARTS_FROM_DESIGN = (optuna.samplers.GPSampler,)


def starts_from_design(setting: str, for_answer: bool, sampler: optuna.samplers.BaseSampler) -> bool:
    """Whether a fresh study starts with the design: `hydra.sweeper.start_design=one_knob_at_a_time`, the
    sweep searching for the answer (replayed, the design started the GP worse for the front), with the GP."""
    return setting == "one_knob_at_a_time" and for_answer and isinstance(sampler, STARTS_FROM_DESIGN)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _farthest(dist: BaseDistribution, value: Any, rng: random.Random,
              allowed: Callable[[Any], bool] = lambda v: True) -> list[Any]:
    """The values of `dist` farthest from `value` as the GP sees the knob: one end, both ends when the value is
    in the middle (neither is farther), a random other choice when the choices are not numbers (one that is
    `allowed` with the others' values: fp8 is never drawn beside compile=none), or none."""
    if isinstance(dist, CategoricalDistribution):
        others = [c for c in dist.choices if c != value]
        if not others:
            return []
        if not (all(_is_number(c) for c in dist.choices) and _is_number(value)):
            others = [c for c in others if allowed(c)]
            return [rng.choice(others)] if others else []
        ranked = sorted(dist.choices)  # shown to the GP as ranks (search/sweep/gp_view.py)
        below, above = bisect.bisect_left(ranked, value), len(ranked) - bisect.bisect_right(ranked, value)
        if below == above:
            return [ranked[0], ranked[-1]]
        return [ranked[0] if below > above else ranked[-1]]
    if isinstance(dist, (IntDistribution, FloatDistribution)) and _is_number(value):
        scale = (lambda v: math.log(v)) if dist.log and value > 0 else (lambda v: v)
        low, high = abs(scale(dist.low) - scale(value)), abs(scale(dist.high) - scale(value))
        ends = [dist.low, dist.high] if math.isclose(low, high) else [dist.low if low > high else dist.high]
        return [end for end in ends if end != value]
    return []


def one_knob_at_a_time(baseline: Mapping[str, Any], distributions: Mapping[str, BaseDistribution],
                       forbids: Callable[[Mapping[str, Any]], Any] | None,
                       rng: random.Random, unused: Callable[[Mapping[str, Any]], set[str]] | None = None,
                       resolved: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
                       work_neutral: frozenset[str] = WORK_NEUTRAL,
                       first: frozenset[str] = SPEED_ONLY) -> list[tuple[str, dict[str, Any]]]:
    """(knob, configuration) for each move of a knob of the space that stays within its rules and has an effect
    (``unused(params)``: the keys ``params`` leave without one, as persistent workers without workers), to a
    value the baseline does not already run with (``resolved(params)``: "auto" values as this machine runs
    them: ``loader.pin_memory: null`` is ``true`` with a GPU, so the move is to ``false`` there); never of a
    ``work_neutral`` knob (not_moved_alone). The moves of the ``first`` knobs (the speed-only ones) come first,
    each group in the space's order (speed_only_first)."""
    runs = resolved or (lambda params: params)
    design = []
    for name, dist in distributions.items():
        if name not in baseline or name in work_neutral or (unused is not None and name in unused(baseline)):
            continue
        def allowed(value: Any, name: str = name) -> bool:
            moved = {**baseline, name: value}
            return (forbids is None or forbids(moved) is None) and runs(moved)[name] != runs(baseline)[name]

        design += [(name, {**baseline, name: value}) for value in _farthest(dist, baseline[name], rng, allowed)
                   if allowed(value)]
    return speed_only_first(design, first)


def speed_only_first(design: list[tuple[str, dict[str, Any]]],
                     speed_only: frozenset[str]) -> list[tuple[str, dict[str, Any]]]:
    """The moves of speed-only knobs before the others. A speed-only move trains your configuration's maths,
    so it is timed only (staging) and its accuracy is yours: at the floor by construction. The fastest of them
    raises early stopping's bar before a move that changes the maths runs, and such a move slower than it then
    stops at its probe instead of training its budget (it cannot be the answer): on the default CPU space
    batch_size=256 ran first and trained in full at 0.95-0.97x your configuration's speed (4.9 s); after
    loader.num_workers=2 (timed at 1.53x) it stops at its probe (2.3 s). Replayed on the measured grids, the
    seconds of a 20-trial search fell (digits_long_grid 120 s to 106 s), the trials to the target unchanged."""
    return sorted(design, key=lambda move: move[0] not in speed_only)


def not_moved_alone(distributions: Mapping[str, BaseDistribution],
                    work_neutral: frozenset[str] = WORK_NEUTRAL) -> list[str]:
    """The knobs of the space the start design leaves to the sampler because they change the maths but not the
    work a step does: moved alone, the same work runs at your configuration's speed."""
    return [name for name in distributions if name in work_neutral]


def enqueue_start(study: optuna.Study, design: list[tuple[str, dict[str, Any]]], room: int | None = None) -> None:
    """Enqueue the start design (after the baseline's runs, which are enqueued first): the moves that fit in
    `room` (the trials n_trials leaves after the baseline's runs; None: all). The others are kept on the study
    (DEFERRED_ATTR) for its next sweep, not enqueued: a trial left waiting when the search ends would have
    to be closed before the confirmation (search/sweep/roles.py set_aside_waiting), and stay in the study as
    a failed trial that never ran."""
    fits = design if room is None else design[:max(0, room)]
    for knob, params in fits:
        study.enqueue_trial(params, user_attrs={START_ATTR: knob}, skip_if_exists=False)
    study._storage.set_study_system_attr(study._study_id, DEFERRED_ATTR,
                                         [[knob, params] for knob, params in design[len(fits):]])


def deferred(study: optuna.Study) -> list[tuple[str, dict[str, Any]]]:
    """The start moves kept on the study for a later sweep (enqueue_start), in order."""
    return [(knob, params) for knob, params in
            study._storage.get_study_system_attrs(study._study_id).get(DEFERRED_ATTR, [])]


def enqueue_deferred(study: optuna.Study, room: int) -> list[tuple[str, dict[str, Any]]]:
    """Enqueue the start moves an earlier sweep of this study had no room for, the first `room` of them, and
    keep the rest for the sweep after; the moves enqueued."""
    left = deferred(study)
    if not left:
        return []
    enqueue_start(study, left, room)
    return left[:max(0, room)]


def start_line(design: list[tuple[str, dict[str, Any]]], room: int, n_trials: int, nightly: bool = False,
               left: list[str] | None = None) -> str:
    """What the sweep says of its start; `room`: the trials n_trials leaves after the baseline's runs (the
    moves past it are kept on the study, and run first in its next sweep: enqueue_deferred). A night is a study
    of its own: its next sweep is that night run again, never the next night. `left`: the knobs not moved alone
    (not_moved_alone)."""
    moved = ", ".join(f"{knob}={params[knob]}" for knob, params in design)
    room = max(0, room)
    when = ("only if this night is run again (each night is a new study: a larger hydra.sweeper.n_trials runs them "
            "tonight)") if nightly else "first in this study's next sweep"
    later = (f"; {room} fit in hydra.sweeper.n_trials={n_trials} after your configuration's runs, the other "
             f"{len(design) - room} run {when}") if len(design) > room else ""
    alone = (f"; {', '.join(left)} not moved alone (the same work at your configuration's speed; the sampler "
             f"moves {'them' if len(left) > 1 else 'it'} with the others)") if left else ""
    return (f"start: {len(design)} trial(s), each moving one knob from your configuration ({moved}){later}{alone}; "
            f"hydra.sweeper.start_design=sampler leaves the start to the sampler")

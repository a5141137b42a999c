"""The search's first moves, as an engineer makes them by hand: one knob at a time from the fastest
configuration at your accuracy so far.

After your configuration's runs and the practitioner's recipe
(search/sweep/recipe.py), each swept knob is moved once from the fastest
configuration at the floor so far (your configuration's accuracy less
`hydra.sweeper.accuracy_tolerance`): to the value farthest from that
configuration's, as the GP sees the knob (the other end of a numeric knob's
choices or range; both ends, one after the other, when its value is in the
middle); for a knob whose values are not numbers, to the recipe's value on
this hardware when it has one, else to one drawn with the sweep's seed.
Speed-only knobs go first (they are timed only, at your accuracy, and
raise early stopping's bar for the moves after them), then the others,
each group in an order drawn with the sweep's seed: seeds explore apart.
Because each move starts from the best so far, the moves that pay add up
(a faster loader, then bf16 on top of it), and one that does not is left
behind. A knob that changes the maths but not the work a step does (the
learning rate: KNOB.work_neutral) is never moved alone: the same work runs
at the same speed.

Two repairs follow a move that went too far, before the next knob
(`hydra.sweeper.start_combination=false` leaves both out):

- **Halfway back**: a move (or the recipe's batch size) that was faster
  than where it started but fell below the floor, that early stopping
  ended at its probe while faster than where it started (its accuracy
  unknown), or that ran out of memory is run again with its knob halfway
  back towards where it started (the middle choice in the GP's order), and
  again from there: a bisection towards the value that still fits.
- **The learning rate retuned**: a configuration faster than the best
  beyond noise but below the floor (a larger batch at your learning rate)
  is run with its learning rate one choice up and one down from its most
  accurate run's, fastest first: the learning rate changes the maths, not
  the speed, so a larger batch may keep your accuracy at another one.

Stateless: the next move is read from the study's trials each time (a
resumed or killed sweep goes on where the study is), enqueued only while
nothing else waits to run, so that it is the very next trial. Moves count
in n_trials; those a sweep has no room for are the next sweep's first.
They are proposals in every other way: early stopping stops them, staging
times a speed-only move only. The GP (the default sampler) then searches
near the best, knowing each knob's effect (search/sweep/per_second.py).
`hydra.sweeper.start_design=sampler` leaves the start to the sampler, as do
`search_for=front` and every sampler but the GP (STARTS_FROM_DESIGN).
"""
from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from objectives.knobs import SPEED_ONLY, WORK_NEUTRAL
from search.record import (ACCURACY_FROM_ATTR, BASELINE, HALFWAY_ATTR, MOVED_FROM_ATTR, OOM, RECIPE_ATTR,
                           RETUNED_ATTR, SEED_ATTR, START_ATTR, STOPPED_EARLY, THROUGHPUT, accuracy, metrics, outcome,
                           role)
from search.sweep.early_stopping import fastest_at_floor
from search.sweep.no_repeat import configuration_key, trial_key
from search.sweep.patience import noise_of

# The samplers the start design was measured to help (docs/BENCHMARKS.md, Search efficiency): the GP; random,
# grid and quasi-random sampling have a design of their own.
STARTS_FROM_DESIGN = (optuna.samplers.GPSampler,)
PROBE = "probe_throughput_samples_per_s"


def starts_from_design(setting: str, for_answer: bool, sampler: optuna.samplers.BaseSampler) -> bool:
    """Whether the search starts with the design: `hydra.sweeper.start_design=one_knob_at_a_time`, the sweep
    searching for the answer, with the GP."""
    return setting == "one_knob_at_a_time" and for_answer and isinstance(sampler, STARTS_FROM_DESIGN)


@dataclass(frozen=True)
class Move:
    """A trial the design enqueues next: its configuration, the attributes that say what it is, and a line."""

    params: dict[str, Any]
    attrs: dict[str, Any]
    line: str


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def knob_order(distributions: Mapping[str, BaseDistribution], rng: random.Random) -> list[str]:
    """The knobs the design moves, in its order: the speed-only ones first, then the others but the work-neutral
    ones, each group shuffled with the sweep's seed."""
    speed = [k for k in distributions if k in SPEED_ONLY]
    other = [k for k in distributions if k not in SPEED_ONLY and k not in WORK_NEUTRAL]
    rng.shuffle(speed)
    rng.shuffle(other)
    return speed + other


def farthest(dist: BaseDistribution, value: Any, rng: random.Random,
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


def halfway(dist: BaseDistribution, start: Any, moved: Any) -> Any | None:
    """The value halfway between where a move started and where it went, as the GP sees the knob: the middle
    choice in their order (nearer the move when two are), the middle of a range (geometric on a log scale, on
    the step's grid); None when none lies between or the values are not numbers."""
    numbers = _is_number(start) and _is_number(moved)
    if isinstance(dist, CategoricalDistribution):
        if not numbers or not all(_is_number(c) for c in dist.choices):
            return None
        ranked = sorted(dist.choices)
        if start not in ranked or moved not in ranked:
            return None
        i, j = ranked.index(start), ranked.index(moved)
        return ranked[(i + j + (1 if j > i else 0)) // 2] if abs(j - i) >= 2 else None
    if not numbers or not isinstance(dist, (IntDistribution, FloatDistribution)):
        return None
    middle = math.sqrt(start * moved) if dist.log and start > 0 and moved > 0 else (start + moved) / 2
    if dist.step is not None:
        middle = dist.low + round((middle - dist.low) / dist.step) * dist.step
    value = int(round(middle)) if isinstance(dist, IntDistribution) else float(middle)
    return value if min(start, moved) < value < max(start, moved) else None


def _speed(trial: FrozenTrial) -> float | None:
    """What a trial measured of its speed: its throughput, or its probe's when early stopping ended it."""
    m = metrics(trial)
    return m.get(PROBE, m.get(THROUGHPUT))


class Design:
    """The design's state of mind on one study: where it stands and what it has tried."""

    def __init__(self, study: optuna.Study, floor: float, space: Any, order: Sequence[str],
                 prior: Mapping[str, Any], rng: random.Random, repairs: bool):
        self.trials = study.get_trials(deepcopy=False)
        self.floor, self.space, self.order, self.prior = floor, space, order, prior
        self.rng, self.repairs = rng, repairs
        self.best = fastest_at_floor(self.trials, floor)
        runs = space.runs_as
        self.seen = {trial_key(t, runs) for t in self.trials if t.params and t.state != TrialState.FAIL}

    def fresh(self, params: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
        """Not run yet, within the rules, and run otherwise than `than` here."""
        runs = self.space.runs_as
        return configuration_key(params, runs) not in self.seen and self.space.broken_rule(params) is None \
            and runs(dict(params)) != runs(dict(than))

    def next(self) -> Move | None:
        """A repair of a move that went too far first, then the next knob's move; None: nothing left."""
        if self.best is None:
            return None
        repair = (self._halfway() or self._retuned()) if self.repairs else None
        return repair or self._one_knob()

    def _halfway(self) -> Move | None:
        """A move (or the recipe's batch size) that went too far, halfway back towards where it started."""
        for t in self.trials:
            knob, start = self._moved(t)
            if knob is None or start is None or not self._too_far(t, start):
                continue
            value = halfway(self.space.distributions[knob], start.params[knob], t.params[knob])
            candidate = {**t.params, knob: value}
            if value is not None and self.fresh(candidate, t.params):
                return Move(candidate, {HALFWAY_ATTR: knob, MOVED_FROM_ATTR: start.number},
                            f"start: {knob}={value}, halfway back from trial {t.number}'s {knob}={t.params[knob]}, "
                            f"which {self._why(t)}")
        return None

    def _moved(self, t: FrozenTrial) -> tuple[str | None, FrozenTrial | None]:
        """The knob a trial moved and the trial it started from; the recipe's batch size from your configuration."""
        if t.state != TrialState.COMPLETE:
            return None, None
        if RECIPE_ATTR in t.user_attrs:
            base = next((b for b in self.trials if b.params and SEED_ATTR not in b.user_attrs and role(b) == BASELINE),
                        None)
            moved = base is not None and "batch_size" in self.space.distributions \
                and t.params.get("batch_size") != base.params.get("batch_size")
            return ("batch_size", base) if moved else (None, None)
        knob = t.user_attrs.get(START_ATTR) or t.user_attrs.get(HALFWAY_ATTR)
        start = t.user_attrs.get(MOVED_FROM_ATTR)
        if knob not in self.space.distributions or start is None or start >= len(self.trials):
            return None, None
        return knob, self.trials[start]

    def _too_far(self, t: FrozenTrial, start: FrozenTrial) -> bool:
        if outcome(t) == OOM:
            return True
        speed, from_speed = _speed(t), _speed(start)
        if speed is None or from_speed is None or speed <= from_speed:
            return False
        return outcome(t) == STOPPED_EARLY or (accuracy(t) is not None and accuracy(t) < self.floor)

    def _why(self, t: FrozenTrial) -> str:
        return {OOM: "ran out of memory", STOPPED_EARLY: "was stopped early, its accuracy unknown"}.get(
            outcome(t), "was faster but below your accuracy")

    def _retuned(self) -> Move | None:
        """A work faster than the best beyond noise but below the floor, its learning rate one choice either side
        of its most accurate run's, fastest work first."""
        neutral = [k for k in self.space.distributions if k in WORK_NEUTRAL
                   and isinstance(self.space.distributions[k], CategoricalDistribution)]
        if not neutral:
            return None
        bar = _speed(self.best) * (1.0 + noise_of(self.trials))
        works: dict[tuple, list[FrozenTrial]] = {}
        for t in self.trials:
            if t.state == TrialState.COMPLETE and outcome(t) == "ok" and accuracy(t) is not None \
                    and SEED_ATTR not in t.user_attrs and ACCURACY_FROM_ATTR not in t.user_attrs:
                work = tuple(sorted((k, repr(v)) for k, v in t.params.items() if k not in WORK_NEUTRAL))
                works.setdefault(work, []).append(t)
        fast = [runs for runs in works.values() if max(accuracy(r) for r in runs) < self.floor
                and max(_speed(r) for r in runs) > bar]
        for runs in sorted(fast, key=lambda runs: -max(_speed(r) for r in runs)):
            t = max(runs, key=accuracy)
            for knob in neutral:
                ranked = sorted(self.space.distributions[knob].choices)
                i = ranked.index(t.params[knob])
                for j in (i + 1, i - 1):
                    candidate = {**t.params, knob: ranked[j]} if 0 <= j < len(ranked) else None
                    if candidate is not None and self.fresh(candidate, t.params):
                        return Move(candidate, {RETUNED_ATTR: knob, MOVED_FROM_ATTR: t.number},
                                    f"start: {knob}={ranked[j]} for trial {t.number}'s configuration, "
                                    f"{_speed(t) / _speed(self.best):.2f}x the best but below your accuracy")
        return None

    def _one_knob(self) -> Move | None:
        """The next knob not moved yet, from the best so far; a knob's other end when its first move started in
        the middle of its values."""
        centre = dict(self.best.params)
        moved: dict[str, list[FrozenTrial]] = {}
        for t in self.trials:
            if t.user_attrs.get(START_ATTR) in self.space.distributions:
                moved.setdefault(t.user_attrs[START_ATTR], []).append(t)
        for knob in self.order:
            if knob not in centre:
                continue
            dist = self.space.distributions[knob]
            if knob in moved:
                values = self._other_end(knob, moved[knob])
            else:
                values = farthest(dist, centre[knob], self.rng, lambda v, k=knob: self.fresh({**centre, k: v}, centre))
                want = self.prior.get(knob)
                if want is not None and not _is_number(want) and want != centre[knob] \
                        and self.fresh({**centre, knob: want}, centre):
                    values = [want]
                self.rng.shuffle(values)
            for value in values:
                if self.fresh({**centre, knob: value}, centre):
                    return Move({**centre, knob: value}, {START_ATTR: knob, MOVED_FROM_ATTR: self.best.number},
                                f"start: {knob}={value}, one knob moved from trial {self.best.number} (the fastest at "
                                f"your accuracy so far)")
        return None

    def _other_end(self, knob: str, tried: list[FrozenTrial]) -> list[Any]:
        """The other end of a knob whose one move started in the middle of its values; [] otherwise."""
        if len(tried) != 1 or MOVED_FROM_ATTR not in tried[0].user_attrs:
            return []
        start = self.trials[tried[0].user_attrs[MOVED_FROM_ATTR]].params.get(knob)
        ends = farthest(self.space.distributions[knob], start, self.rng)
        return [v for v in ends if v != tried[0].params.get(knob)] if len(ends) == 2 else []


def next_move(study: optuna.Study, floor: float | None, space: Any, order: Sequence[str],
              prior: Mapping[str, Any], rng: random.Random, repairs: bool = True) -> Move | None:
    """The design's next trial on this study, or None: the floor not known yet, or nothing left to move."""
    if floor is None:
        return None
    return Design(study, floor, space, order, prior, rng, repairs).next()


def start_line(order: Sequence[str], left: Sequence[str]) -> str:
    """What the sweep says of its start: the knobs it moves, in order, and those it leaves to the sampler."""
    alone = (f"; {', '.join(left)} not moved alone (the same work at the same speed; the sampler moves "
             f"{'them' if len(left) > 1 else 'it'} with the others)") if left else ""
    return (f"start: each knob moved once from the fastest configuration at your accuracy so far "
            f"({', '.join(order)}){alone}; hydra.sweeper.start_design=sampler leaves the start to the sampler")

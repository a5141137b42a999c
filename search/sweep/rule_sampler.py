"""A sampler that never proposes swept values that break a rule together, nor a
configuration the study has already run.

Optuna's distributions are independent, so a space cannot leave out a pair
(2 ranks with 2 threads each on 2 cores; fp8 with compile=none when both are
swept). Rather than spending a trial number on a configuration known to be
impossible, this wraps the study's sampler and keeps its proposals inside the
rules (``Space.forbids``, search/sweep/combinations.py):

- a joint proposal (``sample_relative``: GP, multivariate TPE) that breaks a
  rule is drawn again a few times, then repaired: one of the values the rule
  reads is changed, at random among the changes that keep to every rule, so
  the trial stays close to what the sampler asked for and the sampler learns
  from what really ran (the change is the trial's ``search.repaired``);
- a value sampled on its own (random start-up trials, univariate TPE) that
  breaks a rule with the values already chosen is drawn again, then chosen at
  random among the values that keep to the rules.

A proposal that repeats a configuration the study has run (completed, stopped
early, infeasible) or is running is repaired the same way, before a trial
number is spent on it: a joint proposal is changed one value at a time
towards a configuration not run yet (``search.repaired`` says so), and the
last value sampled on its own is chosen among those that complete an unseen
configuration. Searching for the answer with staging, a joint proposal's
repair takes first, one or two changes away, an unseen configuration whose
maths trained at the accuracy floor (``reached``, search/sweep/settled.py):
staging only times it, and it can be the answer; the nearest new maths
trains in full, and near a settled proposal it is mostly below the floor
too. Only when every configuration near the proposal has run is an
unseen one drawn at random; once the whole space has run, the proposal stays
(search/sweep/no_repeat.py then lets it run as a re-measurement). Samplers
propose repeats because a categorical space is small and their model peaks
where it already measured (GP re-proposed one early-stopped configuration 4
times in a 20-trial default sweep). Searching for the answer, a configuration
whose maths already trained below the accuracy floor counts as run too
(``settled``, search/sweep/settled.py): staging would time it and score it
below the floor, so it cannot be the answer.

Every trial's parameters are plain values of the study's distributions, so
the sampler's model, resuming, and the grid sampler (which is not wrapped:
it enumerates its grid) are unaffected.
"""
from __future__ import annotations

import itertools
import math
import random
from collections.abc import Container
from typing import Any, Callable, Mapping

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    IntDistribution,
)
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from search.record import REPAIRED_ATTR
from search.sweep.no_repeat import Resolved, configuration_key, trial_key
from search.sweep.settled import Settled
from search.sweep.staging import maths_of
from search.sweep.wrapped_sampler import WrappedSampler

_REDRAWS = 3
_RANDOM_DRAWS = 200
_MAX_COMPLETIONS = 4096  # configurations a value sampled on its own may lead to, checked for one not run yet
_RUN_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)  # as search/sweep/no_repeat.py


class RuleAwareSampler(WrappedSampler):
    def __init__(self, base: BaseSampler, forbids: Callable[[Mapping[str, Any]], Any], seed: int | None = None,
                 avoid_repeats: bool = True, resolved: Resolved | None = None, settled: Settled | None = None,
                 reached: Settled | None = None):
        super().__init__(base)
        self.avoid_repeats = avoid_repeats  # False: repeats pass (the replay's "before", search_efficiency.py)
        self._forbids = forbids
        self._resolved = resolved  # Space.runs_as: a repeat is what runs the same here, however written
        self._settled = settled  # the maths whose configurations count as run: they cannot be the answer
        self._reached = reached  # the maths at the floor: an unseen configuration of one is only timed
        self._rng = random.Random(seed)
        self._relative: dict[int, dict[str, Any]] = {}  # trial number -> its joint proposal, until it ends
        self._seen_at: tuple[tuple, _Seen] | None = None  # the last _seen, by the study's trials then

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        params = self.base.sample_relative(study, trial, search_space)
        for _ in range(_REDRAWS):
            if not params or self._forbids({**trial.params, **params}) is None:
                break
            params = self.base.sample_relative(study, trial, search_space)
        proposed = dict(params)
        seen = self._seen(study)
        params = self._repaired(dict(params), trial.params, search_space, seen)
        if self.avoid_repeats:
            reached = self._reached(study) if self._reached is not None else frozenset()
            params = self._unseen(params, trial.params, search_space, seen, reached)
        changed = [f"{k}: {proposed[k]!r} -> {v!r}" for k, v in params.items() if proposed[k] != v]
        if changed:  # on the trial, so a user sees what the sampler asked for
            study._storage.set_trial_user_attr(trial._trial_id, REPAIRED_ATTR, "; ".join(changed))
        self._relative[trial.number] = params
        return params

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        chosen = {**self._relative.get(trial.number, {}), **trial.params}
        value = self.base.sample_independent(study, trial, param_name, param_distribution)
        for _ in range(_REDRAWS):
            if self._forbids({**chosen, param_name: value}) is None:
                break
            value = self.base.sample_independent(study, trial, param_name, param_distribution)
        else:
            allowed = [v for v in _choices(param_distribution) if self._forbids({**chosen, param_name: v}) is None]
            value = self._rng.choice(allowed) if allowed else value
        if not self.avoid_repeats:
            return value
        return self._unseen_value(study, chosen, param_name, param_distribution, value)

    def _unseen_value(self, study: optuna.Study, chosen: Mapping[str, Any], name: str, dist: BaseDistribution,
                      value: Any) -> Any:
        """``value``, or when every configuration it can still lead to has run (or breaks a rule), another
        value of ``name`` that leaves an unseen one (the value is sampled on its own: random, or univariate)."""
        trials = study.get_trials(deepcopy=False, states=_RUN_STATES)
        seen = self._seen(study)
        space: dict[str, BaseDistribution] = {}
        for t in trials:
            space.update(t.distributions)
        space[name] = dist
        if not self._used_up({**chosen, name: value}, space, seen):
            return value
        fresh = [v for v in _choices(dist) if v != value and self._forbids({**chosen, name: v}) is None
                 and not self._used_up({**chosen, name: v}, space, seen)]
        return self._rng.choice(fresh) if fresh else value

    def _used_up(self, partial: Mapping[str, Any], space: Mapping[str, BaseDistribution],
                 seen: Container[tuple]) -> bool:
        """Whether every configuration of ``space`` that completes ``partial`` has run or breaks a rule (False
        when there are too many to tell)."""
        rest = [k for k in space if k not in partial]
        if any(not _countable(space[k]) for k in rest):  # a float range: repeats are (almost) impossible
            return False
        choices = [_choices(space[k]) for k in rest]
        if math.prod(len(c) for c in choices) > _MAX_COMPLETIONS:
            return False
        for values in itertools.product(*choices):
            full = {**partial, **dict(zip(rest, values))}
            if self._key(full) not in seen and self._forbids(full) is None:
                return False
        return True

    def _key(self, params: Mapping[str, Any]) -> tuple:
        return configuration_key(params, self._resolved)

    def _seen(self, study: optuna.Study) -> "_Seen":
        """The configurations that count as run: those the study has run, stopped or is running, and those of
        the maths the answer is settled for."""
        trials = study.get_trials(deepcopy=False, states=_RUN_STATES)
        mark = (study._study_id, len(trials), sum(t.state == TrialState.RUNNING for t in trials))
        if self._seen_at is None or self._seen_at[0] != mark:  # each value a trial samples on its own asks again
            self._seen_at = (mark, _Seen({trial_key(t, self._resolved) for t in trials},
                                         self._settled(study) if self._settled is not None else frozenset()))
        return self._seen_at[1]

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Any) -> None:
        self._relative.pop(trial.number, None)
        self.base.after_trial(study, trial, state, values)

    def _unseen(self, params: dict[str, Any], fixed: Mapping[str, Any], space: Mapping[str, BaseDistribution],
                seen: Container[tuple], reached: Container[tuple] = frozenset()) -> dict[str, Any]:
        """``params``, or when they repeat a configuration the study has run, the nearest unseen one within
        the rules: one value changed if any such change is unseen, else two, else one drawn at random. Where
        one or two changes reach an unseen configuration whose maths trained at the floor (``reached``), it
        is taken first: staging only times it (a third to a half of a full training on the default CPU space),
        and its accuracy is at the floor by construction."""
        if not params or self._key({**fixed, **params}) not in seen:
            return params
        keys = [k for k in params if k in space]

        def ok(candidate: dict[str, Any]) -> bool:
            full = {**fixed, **candidate}
            return self._key(full) not in seen and self._forbids(full) is None

        def timed_only(candidate: dict[str, Any]) -> bool:
            return maths_of(self._key({**fixed, **candidate})) in reached

        ones = [{**params, k: v} for k in keys for v in _choices(space[k]) if v != params[k]]

        def two_changes() -> list[dict[str, Any]]:
            return [{**c, k: v} for c in ones for k in keys for v in _choices(space[k])
                    if v != c[k] and v != params[k] and ok({**c, k: v})]

        found, twos = [c for c in ones if ok(c)], None
        if reached:
            twos = two_changes()
            cheap = [c for c in found if timed_only(c)] or [c for c in twos if timed_only(c)]
            if cheap:
                return self._rng.choice(cheap)
        if not found:
            found = two_changes() if twos is None else twos
        if not found:
            for _ in range(_RANDOM_DRAWS):
                candidate = {k: self._rng.choice(_choices(space[k])) for k in keys}
                if ok(candidate):
                    found = [candidate]
                    break
        return self._rng.choice(found) if found else params

    def _repaired(self, params: dict[str, Any], fixed: Mapping[str, Any], space: Mapping[str, BaseDistribution],
                  seen: Container[tuple]) -> dict[str, Any]:
        """``params`` changed one value at a time until they keep to every rule (as far as one change can),
        preferring a change to a configuration the study has not run: a sampler whose model still favours
        the forbidden pair would otherwise be repaired into the same trial each time (search/sweep/no_repeat.py
        would then skip it)."""
        for _ in range(len(params)):
            broken = self._forbids({**fixed, **params})
            if broken is None:
                break
            keys = [k for k in getattr(broken, "fields", ()) if k in params and k in space]
            changes = [(k, v) for k in keys for v in _choices(space[k])
                       if v != params[k] and self._forbids({**fixed, **params, k: v}) is None]
            unseen = [(k, v) for k, v in changes if self._key({**fixed, **params, k: v}) not in seen]
            if not changes:
                changes = [(k, v) for k in keys for v in _choices(space[k]) if v != params[k]]
            if not changes:
                break
            key, value = self._rng.choice(unseen or changes)
            params[key] = value
        return params


class _Seen:
    """Configuration keys that count as run: a set of them, and every key whose maths is settled."""

    def __init__(self, run: set[tuple], settled: frozenset):
        self._run, self._settled = run, settled

    def __contains__(self, configuration: tuple) -> bool:
        return configuration in self._run or (bool(self._settled) and maths_of(configuration) in self._settled)


def within_rules(sampler: BaseSampler, forbids: Callable[[Mapping[str, Any]], Any] | None,
                 seed: int | None = None, resolved: Resolved | None = None,
                 settled: Settled | None = None, reached: Settled | None = None) -> BaseSampler:
    """The sampler kept inside the rules (``forbids`` None: a space without rules), away from repeats and from
    the maths ``settled`` names; the grid sampler (it enumerates its grid, each point once) is left as it is."""
    from optuna.samplers import GridSampler

    if isinstance(sampler, GridSampler):
        return sampler
    return RuleAwareSampler(sampler, forbids or _no_rule, seed, resolved=resolved, settled=settled, reached=reached)


def _no_rule(params: Mapping[str, Any]) -> None:
    return None


def _countable(dist: BaseDistribution) -> bool:
    """Whether ``_choices`` lists every value of ``dist``: a categorical, or an int range of at most 64 values."""
    if isinstance(dist, IntDistribution):
        return (dist.high - dist.low) // (dist.step or 1) < 64
    return isinstance(dist, CategoricalDistribution)


def _choices(dist: BaseDistribution) -> list[Any]:
    """The values a repair may pick: a categorical's choices, an int range's values (or its bounds when
    large), a float range's bounds."""
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    low, high = dist.low, dist.high  # type: ignore[attr-defined]
    if isinstance(low, int) and isinstance(high, int):
        step = getattr(dist, "step", 1) or 1
        values = list(range(low, high + 1, step))
        return values if len(values) <= 64 else [low, high]
    return [low, high]

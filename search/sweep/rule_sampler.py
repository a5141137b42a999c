"""A sampler that never proposes swept values that break a rule together.

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

Every trial's parameters are plain values of the study's distributions, so
the sampler's model, resuming, and the grid sampler (which is not wrapped:
it enumerates its grid) are unaffected.
"""
from __future__ import annotations

import random
from typing import Any, Callable, Mapping

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

_REDRAWS = 3
REPAIRED_ATTR = "search.repaired"  # the values changed to keep a joint proposal inside the rules


class RuleAwareSampler(BaseSampler):
    def __init__(self, base: BaseSampler, forbids: Callable[[Mapping[str, Any]], Any], seed: int | None = None):
        self.base = base
        self._forbids = forbids
        self._rng = random.Random(seed)
        self._relative: dict[int, dict[str, Any]] = {}  # trial number -> its joint proposal, until it ends

    def __getattr__(self, name: str) -> Any:  # the wrapped sampler's own settings and methods
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.base.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        params = self.base.sample_relative(study, trial, search_space)
        for _ in range(_REDRAWS):
            if not params or self._forbids({**trial.params, **params}) is None:
                break
            params = self.base.sample_relative(study, trial, search_space)
        proposed = dict(params)
        params = self._repaired(dict(params), trial.params, search_space, _seen(study))
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
                return value
            value = self.base.sample_independent(study, trial, param_name, param_distribution)
        allowed = [v for v in _choices(param_distribution) if self._forbids({**chosen, param_name: v}) is None]
        return self._rng.choice(allowed) if allowed else value

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Any) -> None:
        self._relative.pop(trial.number, None)
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()

    def _repaired(self, params: dict[str, Any], fixed: Mapping[str, Any], space: Mapping[str, BaseDistribution],
                  seen: set[tuple]) -> dict[str, Any]:
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
            unseen = [(k, v) for k, v in changes if _key({**fixed, **params, k: v}) not in seen]
            if not changes:
                changes = [(k, v) for k in keys for v in _choices(space[k]) if v != params[k]]
            if not changes:
                break
            key, value = self._rng.choice(unseen or changes)
            params[key] = value
        return params


def within_rules(sampler: BaseSampler, forbids: Callable[[Mapping[str, Any]], Any] | None,
                 seed: int | None = None) -> BaseSampler:
    """The sampler kept inside the rules; the grid sampler (it enumerates its grid) and a space without
    rules are left as they are."""
    from optuna.samplers import GridSampler

    if forbids is None or isinstance(sampler, GridSampler):
        return sampler
    return RuleAwareSampler(sampler, forbids, seed)


def _seen(study: optuna.Study) -> set[tuple]:
    from search.sweep.no_repeat import completed_configurations

    return set(completed_configurations(study))


def _key(params: Mapping[str, Any]) -> tuple:
    from search.sweep.no_repeat import _key as key

    return key(params)


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

"""A sampler that hands every call to the sampler it wraps, for wrappers that change one or two of them
(search/sweep/rule_sampler.py, search/sweep/gp_view.py). Optuna has no such wrapper of its own."""
from __future__ import annotations

from typing import Any, Sequence

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState


class WrappedSampler(BaseSampler):
    def __init__(self, base: BaseSampler):
        self.base = base

    def __getattr__(self, name: str) -> Any:  # the wrapped sampler's own settings and methods
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.base.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self.base.sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self.base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()

"""The baseline: the configuration the user runs today, measured first.

It is the config composed from conf/ and the user's fixed overrides, without
the space: each swept knob at the value the config gives it. It runs as the
study's first trials (`search.trial_role=baseline`), `hydra.sweeper.baseline_repeats`
times, never stopped early: the first at the config's `train.seed`, the second
at the next seed, so its throughput is measured twice (its noise) and its
accuracy at two seeds (the answer's second-seed check is compared with it,
search/sweep/confirm.py). A resumed study that has them (ended ok: `had`) runs them no more; one resumed
with another configuration is refused (search/sweep/fixed_config.py).

A baseline value the space does not hold (batch_size 48 against choice(32, 64))
is added to the space, said in one line: the baseline must be a point of the
study for its samplers and its reports. An "auto" value (null) that runs here
as one of the space's values (`loader.pin_memory: null` is on with a GPU, and
the GPU space holds choice(false, true)) is that value instead (Space.resolved),
said in one line: added as a third choice, it made the GP model one
configuration as two.
"""
from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any, Callable, Mapping

import optuna
from omegaconf import OmegaConf
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from search.record import ACCURACY, BASELINE, OK, SEED_ATTR, TOLERANCE_ATTR, metrics, outcome, role
from search.sweep.roles import enqueue
from search.sweep.space import Space


def baseline_params(compose: Callable[[list[str]], Mapping[str, Any]], space: Space) -> tuple[dict[str, Any], int | None]:
    """Each swept knob's value in the config composed without the space, and its `train.seed` (None: the
    app has none, so the baseline's second run cannot change it)."""
    cfg = OmegaConf.create(dict(compose(space.fixed_overrides)))
    seed = OmegaConf.select(cfg, "train.seed", default=None)
    return ({key: OmegaConf.select(cfg, key, default=None) for key in space.distributions},
            seed if isinstance(seed, int) and not isinstance(seed, bool) else None)


def as_run_here(space: Space, params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`params` with each null the space can hold as this machine runs it (Space.resolved) replaced by
    that value, and one line per key replaced."""
    if space.resolved is None:
        return params, []
    here = space.resolved(params)
    out, notes = dict(params), []
    for key, value in params.items():
        dist = space.distributions.get(key)
        if value is None and here.get(key) is not None and isinstance(dist, CategoricalDistribution) \
                and here[key] in dist.choices:
            out[key] = here[key]
            notes.append(f"the baseline's {key}=None runs as {here[key]!r} on this machine: your configuration "
                         f"is that point of the space")
    return out, notes


def _widened(dist: BaseDistribution, value: Any) -> BaseDistribution | None:
    """`dist` holding `value`, or None when it holds it already."""
    if isinstance(dist, CategoricalDistribution):
        return None if value in dist.choices else CategoricalDistribution([*dist.choices, value])
    if isinstance(dist, (IntDistribution, FloatDistribution)):
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{value!r} is not a number")
        if dist.low <= value <= dist.high and (dist.step is None or (value - dist.low) % dist.step == 0):
            return None
        if dist.step is not None and (value - min(dist.low, value)) % dist.step:
            raise ValueError(f"{value!r} is off the range's step {dist.step}")
        kind = type(dist)
        return kind(min(dist.low, value), max(dist.high, value), log=dist.log, step=dist.step)
    return None


def fit_baseline(space: Space, params: dict[str, Any]) -> tuple[Space, list[str]]:
    """The space widened to hold the baseline, and one line per knob it widened (or why there is no baseline)."""
    widened = dict(space.distributions)
    notes = []
    for key, value in params.items():
        try:
            dist = _widened(space.distributions[key], value)
        except ValueError as err:
            return space, [f"no baseline: the config's {key}={value!r} cannot be a point of the space ({err}); "
                           f"fix: set {key} in conf/ to one of the space's values"]
        if dist is not None:
            widened[key] = dist
            was = space.distributions[key]
            how = ("added to its choices" if isinstance(dist, CategoricalDistribution) else
                   f"its range {was.low:g}-{was.high:g} widened to {dist.low:g}-{dist.high:g} to hold it (to search "
                   f"{was.low:g}-{was.high:g} only, give {key} a value in it: your configuration is then measured "
                   f"there)")
            notes.append(f"the baseline's {key}={value!r} is not in the space: {how}")
    return replace(space, distributions=widened), notes


def baseline_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.get_trials(deepcopy=False) if role(t) == BASELINE]


def at_study_seed(trials: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """The trials trained at the study's own `train.seed` (not a second-seed run)."""
    return [t for t in trials if SEED_ATTR not in t.user_attrs]


def baseline_accuracy(study: optuna.Study) -> float | None:
    """The median val_accuracy of the baseline's runs that ended ok, at the study's seed when one of
    them did; None while none has."""
    ok = [t for t in baseline_trials(study) if t.state == TrialState.COMPLETE and outcome(t) == OK]
    accuracies = [metrics(t)[ACCURACY] for t in (at_study_seed(ok) or ok) if ACCURACY in metrics(t)]
    return statistics.median(accuracies) if accuracies else None


def recorded_tolerance(study: optuna.Study) -> float | None:
    """The accuracy tolerance the study's last sweep searched at; None for a study from before it was recorded."""
    value = study.user_attrs.get(TOLERANCE_ATTR)
    return None if value is None else float(value)


def accuracy_floor(study: optuna.Study, tolerance: float) -> float | None:
    """The accuracy the answer must reach: the baseline's minus the tolerance; None while unknown."""
    accuracy = baseline_accuracy(study)
    return None if accuracy is None else accuracy - tolerance


def had(trial: optuna.trial.FrozenTrial) -> bool:
    """A baseline run this study keeps: one waiting or running, or one that ended ok. A run that ended
    infeasible or out of memory is COMPLETE in Optuna, yet measured nothing (a dataset that failed to load): a
    resumed study that kept it would never have the baseline's accuracy, so no answer."""
    if trial.state in (TrialState.WAITING, TrialState.RUNNING):
        return True
    return trial.state == TrialState.COMPLETE and outcome(trial, unrecorded=OK) == OK


def not_measured(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The baseline's runs that ended without a measurement (infeasible, oom): run again on resume."""
    return [t for t in baseline_trials(study) if t.state == TrialState.COMPLETE and not had(t)]


def enqueue_baseline(study: optuna.Study, params: dict[str, Any], repeats: int, seed: int | None) -> int:
    """Enqueue the baseline runs this study lacks (the second at seed + 1, the others at seed); how many.
    Lacking is by seed: a study that kept only the run at seed + 1 (its first run killed) gets one at seed.
    Only a run that ended ok, or one still waiting or running, counts as had (`had`)."""
    have = [t.user_attrs.get(SEED_ATTR) for t in baseline_trials(study) if had(t)]  # None: the study's
    enqueued = 0
    for k in range(repeats):
        at = seed + 1 if k == 1 and seed is not None else None
        if at in have:
            have.remove(at)
            continue
        enqueue(study, params, BASELINE, seed=at)
        enqueued += 1
    return enqueued

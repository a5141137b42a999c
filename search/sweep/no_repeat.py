"""A configuration that already ran is not run again.

Accuracy here is deterministic for a configuration and throughput varies by
a few percent, so a repeat measures only noise; yet on a small categorical
space TPE keeps proposing its favourite (seen in one default sweep: its last
10 trials were the same two configurations, 8 of them repeats). The sweep's
sampler is wrapped (search/sweep/rule_sampler.py) so that it repairs such a
proposal itself, before a trial number is spent. This module is the net
behind it, for a sampler that is not wrapped: when a proposal repeats a
configuration this study has already completed (or stopped early, or is
running now on another device slot or worker), the proposal is closed as
a failed trial marked `search.repeat_of` (samplers ignore failed trials, and
no MLflow run or training is spent on it) and an unseen configuration drawn
at random is enqueued in its place. Once every configuration of a finite
space has run, the sweep stops searching (search/sweep/engine.py
used_up; the confirmation re-measures, interleaved); a trial enqueued
on purpose (a retry, a re-measurement) runs all the same, but for a move
of the start design (search/sweep/start_design.py): whichever worker
proposes next enqueues those, so two workers of one study may enqueue the
same one at the same moment, and the later of the two is closed the same
way when it reaches a worker. A configuration is what runs on this machine, not
how it is written (Space.runs_as): on a GPU, `loader.pin_memory` null and
true are one configuration; with `loader.num_workers=0`, so are both values
of `loader.persistent_workers` (DataLoader is not given it; a default sweep
here ran both as two trials and named the second a contender of the first).
"""
from __future__ import annotations

import itertools
import math
import random
from typing import Any, Callable, Mapping

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from search.record import (COMBINED_ATTR, HALFWAY_ATTR, OUTCOME_ATTR, REASON_ATTR, REPEAT_ATTR, REPLACES_ATTR,
                           RETUNED_ATTR, SKIPPED, START_ATTR)

# enqueued by whichever worker proposes next: two may enqueue the same one
RACED = (START_ATTR, HALFWAY_ATTR, RETUNED_ATTR, COMBINED_ATTR)
_DRAWS = 200


Resolved = Callable[[Mapping[str, Any]], Mapping[str, Any]]  # Space.runs_as: params as this machine runs them


def completed_configurations(study: optuna.Study, but: int | None = None,
                             resolved: Resolved | None = None) -> dict[tuple, int]:
    """Configurations that ran to an answer (completed, or stopped early: its rule would stop it
    again) or are running now (other device slots and workers run trials at the same time),
    except trial number `but`; keyed as this machine runs them (``resolved``)."""
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING))
    return {trial_key(t, resolved): t.number for t in done if t.number != but}


def trial_key(trial: optuna.trial.FrozenTrial, resolved: Resolved | None = None) -> tuple:
    """configuration_key of a trial's parameters, kept on a finished trial (whose parameters no longer change):
    the search reads every trial's key at each ask, and a study of a few hundred trials spent most of its asks
    sorting the same keys again."""
    cached = trial.__dict__.get("_search_key")
    if cached is not None and cached[0] == resolved and cached[1] == len(trial.params):
        return cached[2]
    key = configuration_key(trial.params, resolved)
    if trial.state.is_finished():
        trial.__dict__["_search_key"] = (resolved, len(trial.params), key)
    return key


def configuration_key(params: Mapping[str, Any], resolved: Resolved | None = None) -> tuple:
    """A configuration as this machine runs it: with ``resolved`` (Space.runs_as), ``loader.pin_memory: null``
    and ``true`` are one configuration on a GPU (null is on there), not two, and a key without effect counts
    for nothing."""
    if resolved is not None:
        params = resolved(params)
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def every_configuration(distributions: Mapping[str, BaseDistribution],
                        forbids: Callable[[Mapping[str, Any]], Any] | None = None,
                        resolved: Resolved | None = None, most: int = 4096) -> set[tuple] | None:
    """Every configuration the space holds within its rules, keyed as this machine runs them; None for a space
    with a continuous knob or more than `most` combinations (its end is n_trials, not its size)."""
    values: list[list[Any]] = []
    for dist in distributions.values():
        if isinstance(dist, CategoricalDistribution):
            values.append(list(dist.choices))
        elif isinstance(dist, IntDistribution):
            values.append(list(range(dist.low, dist.high + 1, dist.step)))
        else:
            return None
    if math.prod(len(v) for v in values) > most:
        return None
    keys = list(distributions)
    every = (dict(zip(keys, combo)) for combo in itertools.product(*values))
    return {configuration_key(p, resolved) for p in every if forbids is None or forbids(p) is None}


def _draw(dist: BaseDistribution, rng: random.Random) -> Any:
    if isinstance(dist, CategoricalDistribution):
        return rng.choice(dist.choices)
    if isinstance(dist, IntDistribution):
        return rng.randrange(dist.low, dist.high + 1, dist.step)
    assert isinstance(dist, FloatDistribution)
    if dist.step:
        return dist.low + dist.step * rng.randrange(int(round((dist.high - dist.low) / dist.step)) + 1)
    return rng.uniform(dist.low, dist.high)


def _earlier_twin(study: optuna.Study, trial: optuna.Trial, resolved: Resolved | None) -> int | None:
    """The number of an earlier trial of the same configuration that ran, runs or was stopped, or None. Only the
    later of two twins is closed: two workers that each pop one see each other running, and one must still run."""
    mine = configuration_key(trial.params, resolved)
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING))
    return next((t.number for t in done if t.number < trial.number and trial_key(t, resolved) == mine),
                None)


def ask_unseen(study: optuna.Study, distributions: Mapping[str, BaseDistribution], rng: random.Random,
               forbids: Callable[[Mapping[str, Any]], Any] | None = None,
               resolved: Resolved | None = None) -> optuna.Trial:
    """The sampler's proposal, or an unseen configuration in place of a repeat; ``forbids(params)``
    (the space's rules, search/sweep/combinations.py) keeps the replacement inside the rules, and
    ``resolved`` (Space.runs_as) tells a repeat by what runs, not by how it is written."""
    trial = study.ask(dict(distributions))
    if "fixed_params" in study._storage.get_trial_system_attrs(trial._trial_id):  # enqueued on purpose: it runs
        if not any(a in trial.user_attrs for a in RACED) or (twin := _earlier_twin(study, trial, resolved)) is None:
            return trial
        trial.set_user_attr(REPEAT_ATTR, twin)
        trial.set_user_attr(OUTCOME_ATTR, SKIPPED)
        trial.set_user_attr(REASON_ATTR, f"trial {twin} runs or ran this configuration (another worker enqueued or "
                                      f"proposed it at the same moment); it runs once")
        study.tell(trial, state=TrialState.FAIL)
        return ask_unseen(study, distributions, rng, forbids, resolved)
    seen = completed_configurations(study, but=trial.number, resolved=resolved)
    repeat_of = seen.get(configuration_key(trial.params, resolved))
    if repeat_of is None:
        return trial
    for _ in range(_DRAWS):
        params = {k: _draw(d, rng) for k, d in distributions.items()}
        if configuration_key(params, resolved) not in seen and (forbids is None or forbids(params) is None):
            trial.set_user_attr(REPEAT_ATTR, repeat_of)
            trial.set_user_attr(OUTCOME_ATTR, SKIPPED)
            trial.set_user_attr(REASON_ATTR, f"repeats trial {repeat_of}; an unseen configuration runs instead")
            study.tell(trial, state=TrialState.FAIL)
            study.enqueue_trial(params, user_attrs={REPLACES_ATTR: trial.number})
            return study.ask(dict(distributions))
    return trial  # (almost) every configuration has run: re-measure the sampler's choice

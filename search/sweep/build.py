"""A search put together from the sweep's settings: the sampler as the search shows it the study, the
policies in the order the engine calls them, and the engine.

The Hydra sweeper (search/sweep/sweeper.py) and the benchmark replay
(scripts/bench/search_efficiency.py) both build their search here, from the
same `SweepSettings`, so what the replay measures is what the sweep runs.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import optuna

from search.sweep.constraints import Constraint
from search.sweep.engine import Engine, Policy, Rules
from search.sweep.gp_view import gp_view
from search.sweep.baseline import accuracy_floor
from search.sweep.per_second import EXPLORATION, Known
from search.sweep.policies import EarlyStopping, Patience, Recipe, Staging, StartDesign, YourConfiguration
from search.sweep.recipe import Facts, recipe_params
from search.sweep.rule_sampler import within_rules
from search.sweep.settled import Settled, at_floor, below_floor
from search.sweep.space import Space
from search.sweep.start_design import starts_from_design
from search.sweep.sweep_settings import SweepSettings


def settled(settings: SweepSettings, space: Space, for_answer: bool,
            staging: bool) -> tuple[Settled | None, Settled | None]:
    """Searching for the answer with staging: the maths whose configurations cannot be the answer, and those
    whose unseen configurations are only timed (search/sweep/settled.py); None and None otherwise."""
    if not (for_answer and staging):
        return None, None
    return below_floor(settings.accuracy_tolerance, space.runs_as), at_floor(settings.accuracy_tolerance, space.runs_as)


def search_sampler(base: optuna.samplers.BaseSampler, settings: SweepSettings, space: Space,
                   metrics: Sequence[str] | None, directions: Sequence[str], for_answer: bool,
                   staging: bool) -> optuna.samplers.BaseSampler:
    """`base` (the sampler hydra/sweeper/sampler built) as the search asks it: shown the answer's question once
    your configuration's accuracy is known (search/sweep/gp_view.py), its pick weighing each configuration's cost
    near the answer so far (search/sweep/per_second.py), kept inside the rules and away from repeats
    (search/sweep/rule_sampler.py)."""
    below, reached = settled(settings, space, for_answer, staging)
    tolerance = settings.accuracy_tolerance
    known = Known(reached, below, space.forbids, space.runs_as, lambda study: accuracy_floor(study, tolerance),
                  settings.seed, EXPLORATION) if reached is not None else None
    directed = gp_view(base, "answer" if for_answer else "front", metrics, directions, settings.accuracy_tolerance,
                       same_maths=staging, known=known)
    return within_rules(directed, space.forbids, settings.seed, space.runs_as, below, reached)


def patience_trials(settings: SweepSettings, for_answer: bool, base: optuna.samplers.BaseSampler) -> int | None:
    """hydra.sweeper.patience_trials where it applies: searching for the answer from the start design (the rule
    counts on its trials); None otherwise (a grid or random search runs every trial of n_trials)."""
    return settings.patience_trials if starts_from_design(settings.start_design, for_answer, base) else None


def policies(settings: SweepSettings, space: Space, base: optuna.samplers.BaseSampler, for_answer: bool,
             staging: bool, early_stopping: str, baseline: tuple[dict[str, Any], int | None] | None,
             facts: Facts | None, extra: Sequence[Policy] = ()) -> list[Policy]:
    """The search's policies in the order the engine calls them; `extra` (nightly's hooks) come right after your
    configuration's runs, ahead of the search's own trials."""
    chosen: list[Policy] = []
    designed = baseline is not None and starts_from_design(settings.start_design, for_answer, base)
    if baseline is not None:
        chosen.append(YourConfiguration(baseline[0], baseline[1], settings.baseline_repeats))
    chosen += extra
    prior = recipe_params(facts, baseline[0], space.distributions) if designed and facts is not None else {}
    if designed and facts is not None:
        chosen.append(Recipe(baseline[0], prior, facts.text()))
    if designed:
        chosen.append(StartDesign(settings.seed, prior, settings.start_combination))
    if staging:
        chosen.append(Staging())
    chosen.append(EarlyStopping(early_stopping, settings.early_stopping_margin,
                                settings.early_stopping_startup_trials))
    if (patience := patience_trials(settings, for_answer, base)) is not None:
        chosen.append(Patience(patience))
    return chosen


def engine(study: optuna.Study, space: Space, settings: SweepSettings, metrics: list[str] | None,
           directions: list[str], constraints: list[Constraint], for_answer: bool, chosen: Sequence[Policy],
           grid: Any = None) -> Engine:
    rules = Rules(metrics, directions, constraints, settings.accuracy_tolerance, for_answer, settings.n_trials)
    return Engine(study, space, rules, list(chosen), random.Random(settings.seed), grid)

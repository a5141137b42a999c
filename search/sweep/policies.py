"""The search's policies, each at the engine's fixed points (search/sweep/engine.py).

In the order the engine calls them:

- `YourConfiguration`: your configuration (the baseline) runs first,
  `baseline_repeats` times, never stopped early (search/sweep/baseline.py).
- `Recipe`: then the combination a practitioner tries first on this
  hardware (search/sweep/recipe.py), once.
- `StartDesign`: then, before the sampler's proposals, each knob moved
  once from the fastest configuration at your accuracy so far, a move that
  went too far taken halfway back, a fast configuration below your
  accuracy given its learning rate's neighbours
  (search/sweep/start_design.py).
- `Staging` and `EarlyStopping` instruct each trial: timed only where its
  maths trained already (search/sweep/staging.py), stopped after its probe
  when it cannot be the answer (search/sweep/early_stopping.py).
- `Patience`: the search ends once the sampler's proposals stop paying and
  no one-knob move from the best configuration is left that could beat it
  (search/sweep/patience.py).

The confirmation and nightly's hooks are policies of the sweep alone
(search/sweep/ending.py, search/sweep/hooks.py): the replay has no
machine to re-measure on.
"""
from __future__ import annotations

import random
from typing import Any

import optuna

from search.sweep.baseline import baseline_trials, enqueue_baseline, not_measured
from search.sweep.early_stopping import trial_overrides
from search.sweep.engine import Engine, Instructions, Policy, Start
from search.sweep.patience import search_ended
from search.sweep.recipe import enqueue_recipe
from search.sweep.staging import THROUGHPUT_ONLY, staged
from search.sweep.start_design import knob_order, next_move, start_line


class YourConfiguration(Policy):
    """Your configuration's runs, enqueued by the study's first worker."""

    def __init__(self, params: dict[str, Any], seed: int | None, repeats: int):
        self.params, self.seed, self.repeats = params, seed, repeats

    def start(self, engine: Engine, start: Start) -> list[str]:
        study = engine.study
        shown = " ".join(f"{k}={v}" for k, v in self.params.items())
        if start.first:
            unmeasured = len(not_measured(study))
            runs = enqueue_baseline(study, self.params, self.repeats, self.seed)
            said = f"runs first, {runs} time(s), never stopped early" if runs else "measured already in this study"
            if runs and unmeasured:
                said += f" (again: {unmeasured} earlier run(s) of it in this study ended without a measurement)"
        else:
            runs, said = 0, "enqueued by the first worker of this study"
        start.fresh = bool(runs) and len(study.trials) == len(baseline_trials(study))
        start.room = engine.rules.n_trials - (runs if start.fresh else 0)
        return [f"baseline, your configuration ({shown}): {said}"]


class Recipe(Policy):
    """The practitioner's first try on this hardware, once, after your configuration's runs in a fresh study."""

    def __init__(self, baseline: dict[str, Any], params: dict[str, Any], hardware: str):
        self.baseline, self.params, self.hardware = baseline, params, hardware

    def start(self, engine: Engine, start: Start) -> list[str]:
        if not (start.fresh and start.room > 0):
            return []
        line = enqueue_recipe(engine.study, self.baseline, self.params, engine.space, self.hardware)
        if line is None:
            return []
        start.room -= 1
        return [line]


class StartDesign(Policy):
    """Each knob moved once from the fastest configuration at your accuracy so far; with `repairs`, a move that
    went too far halfway back and a fast configuration below your accuracy with its learning rate retuned."""

    def __init__(self, seed: int | None, prior: dict[str, Any], repairs: bool = True):
        self.rng = random.Random(seed)
        self.prior, self.repairs = prior, repairs
        self.order: list[str] | None = None

    def start(self, engine: Engine, start: Start) -> list[str]:
        self.order = knob_order(engine.space.distributions, self.rng)
        left = [k for k in engine.space.distributions if k not in self.order]
        return [start_line(self.order, left)] if start.fresh and self.order else []

    def next(self, engine: Engine) -> str | None:
        study = engine.study
        if self.order is None or study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
            return None  # a trial waits to run: it runs first
        move = next_move(study, engine.floor(), engine.space, self.order, self.prior, self.rng, self.repairs)
        if move is None:
            return None
        study.enqueue_trial(move.params, user_attrs=move.attrs, skip_if_exists=False)
        return move.line


class Staging(Policy):
    """A trial whose maths trained already is timed only, scored with that run's accuracy."""

    def instruct(self, engine: Engine, trial: optuna.Trial, instructions: Instructions) -> None:
        lines = staged(engine.study, trial, True)
        instructions.throughput_only = THROUGHPUT_ONLY in lines
        instructions.overrides += lines


class EarlyStopping(Policy):
    """A trial that cannot be the answer (or reach the front) stops after its throughput probe; with one metric,
    Optuna's pruner watches its learning curve."""

    def __init__(self, mode: str, margin: float, startup_trials: int):
        self.mode, self.margin, self.startup_trials = mode, margin, startup_trials

    def instruct(self, engine: Engine, trial: optuna.Trial, instructions: Instructions) -> None:
        if instructions.throughput_only:
            return
        floor = engine.floor() if self.mode == "staged" else None
        lines = trial_overrides(engine.study, trial, self.mode, self.margin, self.startup_trials, floor)
        for line in lines:  # the bar as the trial reads it from its override (6 significant digits)
            if line.startswith("train.stop_below_samples_per_s="):
                instructions.stop_below_samples_per_s = float(line.partition("=")[2])
        instructions.overrides += lines


class Patience(Policy):
    """The search ends once the sampler's proposals stop making the answer faster and no one-knob move from the
    fastest configuration at your accuracy is left unmeasured that could beat it."""

    def __init__(self, trials: int):
        self.trials = trials

    def over(self, engine: Engine) -> str | None:
        return search_ended(engine.study, engine.floor(), self.trials, engine.started_unix_s, engine.space)

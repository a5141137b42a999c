"""The search's decision core: one loop, driven by the sweep and by its replay.

A search step is always the same: the policies may put a trial of their
own first (`next`), Optuna's sampler proposes otherwise (kept inside the
rules and away from repeats: search/sweep/rule_sampler.py, no_repeat.py),
the policies instruct the trial (`instruct`: staging's throughput-only run,
early stopping's bar), the driver runs it, and the engine tells Optuna how
it ended; the policies then say whether the search is over (`over`). At its
start they enqueue their first trials (`start`: your configuration, the
practitioner's recipe, the one-knob moves), and after it they finish
(`finish`: the confirmation, nightly's top-ups).

Two drivers run it. The Hydra sweeper (search/sweep/trial_loop.py) turns an
asked trial into a Hydra job in a device slot and tells the engine its
result; the benchmark replay (scripts/bench/search_efficiency.py) looks the
result up in a measured table instead. Both build the engine with
`build_engine` from the same settings, so the replay measures the product,
not a copy of it.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from search.sweep.baseline import accuracy_floor
from search.sweep.constraints import Constraint
from search.sweep.no_repeat import ask_unseen, completed_configurations, every_configuration
from search.sweep.outcome import Scored, score, tell
from search.sweep.patience import moves_left
from search.sweep.space import Space
from search.sweep.staging import with_inherited_accuracy


@dataclass(frozen=True)
class Rules:
    """What the engine reads of the sweep's settings (hydra.sweeper.*, as the plan fixed them)."""

    metrics: list[str] | None  # the study's metric names; None: a plain task's values
    directions: list[str]
    constraints: list[Constraint]
    tolerance: float  # accuracy_tolerance: the answer's floor is your configuration's accuracy less this
    for_answer: bool  # searching for the answer (docs/answer.md), not the whole front
    n_trials: int = 20  # the sweep's new trials: the start's moves past it wait for the next sweep


@dataclass
class Instructions:
    """What a trial is told besides its knobs, as Hydra overrides and as the replay reads them."""

    throughput_only: bool = False  # staging: timed only, scored with the accuracy of its maths' run
    stop_below_samples_per_s: float | None = None  # early stopping's bar for the trial's throughput probe
    overrides: list[str] = field(default_factory=list)


@dataclass
class Asked:
    """A trial the engine asked for: what the driver runs, and the lines the policies said on the way."""

    trial: optuna.Trial
    instructions: Instructions
    said: list[str] = field(default_factory=list)


@dataclass
class Start:
    """The facts a policy's `start` reads: whether this worker is the study's first searching one (it
    enqueues), whether other workers search the study already, and what was enqueued so far."""

    first: bool = True
    others_searching: bool = False
    fresh: bool = False  # the study held nothing but your configuration's runs: its start design follows
    room: int = 0  # the trials n_trials leaves after what the start enqueued so far
    enqueued: int = 0  # trials enqueued on top of n_trials (nightly's repeats)


class Policy:
    """One of the search's policies, called by the engine at fixed points; each default does nothing.
    Like an Optuna pruner, a policy is told what happened and returns what the engine must know."""

    def start(self, engine: Engine, start: Start) -> list[str]:
        """The study is open and nothing ran yet: enqueue this policy's first trials; the lines to say."""
        return []

    def next(self, engine: Engine) -> str | None:
        """Before the sampler is asked: enqueue one trial to run next; the line saying so, or None."""
        return None

    def instruct(self, engine: Engine, trial: optuna.Trial, instructions: Instructions) -> None:
        """The trial was asked for: add to its instructions."""

    def over(self, engine: Engine) -> str | None:
        """Why the search proposes no more trials, or None: go on."""
        return None

    def finish(self, engine: Engine, run_enqueued: Callable[[int], None]) -> None:
        """The search ended: run what this policy enqueues after it (run_enqueued(n) runs the next n)."""


@dataclass
class Engine:
    study: optuna.Study
    space: Space
    rules: Rules
    policies: list[Policy]  # called in this order; the sweep adds its end's (ending.py) once its run exists
    rng: random.Random
    grid: Any = None  # the sweep's grid sampler, which says itself when every point ran
    started_unix_s: float = field(default_factory=time.time)  # patience counts the sampler's proposals since
    _configurations: set[tuple] | None = field(default=None, repr=False)  # the space's, once counted (used_up)

    def floor(self) -> float | None:
        """The answer's accuracy floor once your configuration measured it, searching for the answer; else None."""
        return accuracy_floor(self.study, self.rules.tolerance) if self.rules.for_answer else None

    def begin(self, start: Start) -> list[str]:
        """Every policy's first trials, in the policies' order; the lines they say."""
        said: list[str] = []
        for policy in self.policies:
            said += policy.start(self, start)
        return said

    def ask(self, searching: bool = True) -> Asked:
        """The next trial and its instructions. `searching`: a trial of the search; False: one enqueued on purpose
        (the confirmation's rounds), which no policy puts a trial of its own before."""
        said = []
        if searching:
            for policy in self.policies:
                if (line := policy.next(self)) is not None:
                    said.append(line)
                    break
        trial = ask_unseen(self.study, self.space.distributions, self.rng, self.space.forbids, self.space.runs_as)
        instructions = Instructions()
        for policy in self.policies:
            policy.instruct(self, trial, instructions)
        return Asked(trial, instructions, said)

    def tell(self, trial: optuna.Trial, result: Any) -> Scored:
        """Score what the trial returned and tell Optuna (a throughput-only trial carries its maths' accuracy)."""
        result = with_inherited_accuracy(self.study, trial, result)
        scored = score(result, self.rules.metrics, len(self.rules.directions), self.rules.constraints)
        tell(self.study, trial, scored, self.rules.directions)
        return scored

    def over(self) -> str | None:
        """Why the search proposes no more trials (the space is used up, or a policy ends it), or None."""
        if (why := self.used_up()) is not None:
            return why
        for policy in self.policies:
            if (why := policy.over(self)) is not None:
                return why
        return None

    def finish(self, run_enqueued: Callable[[int], None]) -> None:
        """Every policy's end, in order (the confirmation, then the hooks' top-ups)."""
        for policy in self.policies:
            policy.finish(self, run_enqueued)

    def moves_left(self) -> list[dict[str, Any]]:
        """The one-knob moves from the answer so far that have not run and could still beat it."""
        floor = self.floor()
        return moves_left(self.study, floor, self.space) if floor is not None else []

    def used_up(self) -> str | None:
        """Why proposing more trials is pointless, or None: the grid sampler's every point has run, or every
        configuration of a finite space has run (or runs now) with nothing waiting to run, so another proposal
        could only repeat one, timed again beside the search. The confirmation re-measures what matters,
        interleaved."""
        if self.grid is not None and self.grid.is_exhausted(self.study):
            return "every grid point has run"
        if self._configurations is None:
            self._configurations = every_configuration(self.space.distributions, self.space.forbids,
                                                       self.space.runs_as) or set()
        if not self._configurations or self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return None
        ran = set(completed_configurations(self.study, resolved=self.space.runs_as))
        return f"every configuration of the space ({len(self._configurations)}) has run" \
            if self._configurations <= ran else None


"""The points where a kind of sweep adds to the plain one.

The nightly sweep (search/nightly/sweep_hooks.py) enqueues last night's best
before the search, stops searching after a wall-clock budget, tops up
tonight's answer after the confirmation, and then tests and reports the night. The sweep
calls these hooks at those points and knows nothing else about nightly;
`NoHooks`, the plain sweep, adds nothing. Like an Optuna callback, a hook is
told what happened and returns what the sweep must know, never more.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

import optuna
from optuna.distributions import BaseDistribution

from search.sweep.engine import Engine, Policy, Start


class SweepHooks(Protocol):
    def named_metrics(self) -> dict[str, str]:
        """Metric name -> the setting that names it, checked like hydra.sweeper.metrics before the sweep."""

    def start(self, study: optuna.Study, storage: Any, distributions: Mapping[str, BaseDistribution],
              first: bool = True) -> int:
        """The study exists, nothing ran yet: the number of trials enqueued on top of n_trials. `first`: this
        worker is the study's first searching one (search/sweep/workers.py), the one that enqueues."""

    def earlier_studies(self) -> list[optuna.Study]:
        """Studies this sweep builds on (nightly: the series' earlier nights), after `start`: what a killed sweep of
        one left running is closed at this start, as a resumed study's is, without retrying it."""

    def run_tags(self) -> dict[str, str]:
        """Tags for the sweep's MLflow parent run."""

    def max_wall_s(self) -> float | None:
        """Stop proposing trials after this long (None: never); `top_up` still runs."""

    def top_up(self) -> int:
        """Called once, after the search and the confirmation: the number of trials it enqueued to run before the
        sweep ends."""

    def finish(self, metric_names: Sequence[str], report_dir: Path, parent_run_id: str | None,
               plot_files: list[Path], last: bool = True) -> int:
        """The sweep ended and its report is written: the exit status (0: fine). `last`: this worker was the study's
        last one searching (search/sweep/workers.py), the one that confirmed and topped up; another still works."""


class NoHooks:
    """The plain sweep."""

    def named_metrics(self) -> dict[str, str]:
        return {}

    def start(self, study: optuna.Study, storage: Any, distributions: Mapping[str, BaseDistribution],
              first: bool = True) -> int:
        return 0

    def earlier_studies(self) -> list[optuna.Study]:
        return []

    def run_tags(self) -> dict[str, str]:
        return {}

    def max_wall_s(self) -> float | None:
        return None

    def top_up(self) -> int:
        return 0

    def finish(self, metric_names: Sequence[str], report_dir: Path, parent_run_id: str | None,
               plot_files: list[Path], last: bool = True) -> int:
        return 0


class HookStart(Policy):
    """The hooks' trials at the search's start (nightly's repeats of last night's answer), right after your
    configuration's runs and ahead of the search's own: they run whatever the time (hooks.max_wall_s), and
    Optuna hands out waiting trials oldest first. They come on top of n_trials (Start.enqueued)."""

    def __init__(self, hooks: SweepHooks, storage: Any):
        self.hooks, self.storage = hooks, storage

    def start(self, engine: Engine, start: Start) -> list[str]:
        start.enqueued += self.hooks.start(engine.study, self.storage, engine.space.distributions, start.first)
        return []

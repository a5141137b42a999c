"""A trial's configuration as Hydra overrides that run it again: what `python -m search export` writes
and what a trial's MLflow run carries (`search.overrides`), ready to paste after `python -m search run`.

A trial is launched with the sweep's fixed overrides (the objective group among them,
search/sweep/planning.py `_reproducible`), its parameters, any extra overrides its role adds
(`train.seed=1` for a run at another seed: that seed is its configuration), and the sweep's
instructions to it: how to measure it (`train.throughput_only`, the early-stopping bar
`train.stop_below_samples_per_s`), where to report (`trial.optuna_*`) and which GPUs it gets.
Only the first three are its configuration.
"""
from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from typing import Any

from search.record import OVERRIDES_ATTR
from search.sweep.space import to_override

REPRODUCE_TAG = "search.overrides"  # trial run tag: paste_line(configuration_overrides(launched))
# What the sweep tells one trial, not part of its configuration (search/sweep/early_stopping.py, trial_loop.py).
SWEEP_INSTRUCTIONS = ("train.stop_below_samples_per_s", "train.throughput_only", "trial.optuna_study",
                      "trial.optuna_trial_number", "trial.visible_devices")


def configuration_overrides(launched: Iterable[str]) -> list[str]:
    """The launch overrides less the sweeper's own settings (`hydra.*` but the search path) and its
    instructions to the trial."""
    return [line for line in launched if _configures(override_key(line))]


def override_key(line: str) -> str:
    """`+loader.num_workers=2` -> `loader.num_workers`."""
    return line.lstrip("+~").partition("=")[0]


def _configures(key: str) -> bool:
    return key == "hydra.searchpath" or not (key.startswith("hydra.") or key in SWEEP_INSTRUCTIONS)


def job_overrides(trial: Any) -> list[str]:
    """A trial's (optuna Trial or FrozenTrial) configuration as overrides; from its parameters alone for a trial
    stored before its launch overrides were kept."""
    launched = trial.user_attrs.get(OVERRIDES_ATTR) or [to_override(k, v) for k, v in trial.params.items()]
    return configuration_overrides(launched)


def paste_line(overrides: Sequence[str]) -> str:
    """The overrides as one shell line (each quoted where the shell would split or expand it)."""
    return shlex.join(overrides)

"""The sweeper's settings (`hydra.sweeper.*`) as plain Python values.

Hydra hands them to the sweeper as keyword arguments of the config
dataclass (hydra_plugins/search_sweeper, SearchSweeperConf); their numeric
rules are in search/sweep/settings.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf


@dataclass
class SweepSettings:
    sampler: Any = None
    direction: Any = "maximize"
    metrics: list[str] | None = None  # the metric names the directions apply to
    storage: str | None = None
    study_name: str | None = None
    n_trials: int = 20
    n_jobs: int = 1
    seed: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    experiment_name: str | None = None
    constraints: list[str] = field(default_factory=list)
    max_retries: int = 1
    stale_after_s: float = 120.0
    max_failure_rate: float = 0.5
    failure_min_trials: int = 4
    batch_size_probe: bool = False
    nightly: dict[str, Any] = field(default_factory=dict)
    pruner: Any = None
    early_stopping: bool = True
    early_stopping_margin: float = 0.1
    early_stopping_startup_trials: int = 5
    slots: Any = "auto"
    trials_per_gpu: int = 1
    accuracy_tolerance: float = 0.005
    baseline_repeats: int = 2
    confirm_budget: float = 0.15
    confirm_candidates: int = 3
    staging: bool = True


def sweep_settings(objectives: Any = None, **given: Any) -> SweepSettings:
    """`objectives` is the old name of `metrics`, still read: it wins when set, with one line saying so."""
    values = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v for k, v in given.items()}
    if objectives is not None:
        print("warning: hydra.sweeper.objectives is deprecated, it is hydra.sweeper.metrics now; "
              "fix: write hydra.sweeper.metrics=[...] (objective means the workload, objective=digits)", flush=True)
        values["metrics"] = OmegaConf.to_container(objectives, resolve=True) if OmegaConf.is_config(objectives) \
            else objectives
    for key in ("params", "nightly"):
        values[key] = values.get(key) or {}
    values["constraints"] = values.get("constraints") or []
    return SweepSettings(**values)

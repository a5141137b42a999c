"""The sweeper's settings (`hydra.sweeper.*`) as plain Python values.

Hydra hands them to the sweeper as keyword arguments of the config
dataclass (hydra_plugins/search_sweeper, SearchSweeperConf); their numeric
rules are in search/sweep/settings.py.

Hydra merges the dataclass's defaults with the user's values, so a setting
equal to its default may or may not have been written; `given_settings`
tells them apart for the settings whose default depends on the app
(`metrics` and `direction`: this package's trials or the user's own task,
search/sweep/planning.py).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

# The defaults of `metrics` and `direction` in SearchSweeperConf: what this package's trials report.
BUILT_IN_METRICS = ["throughput_samples_per_s", "val_accuracy"]
BUILT_IN_DIRECTION = ["maximize", "maximize"]


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
    confirm_undecided_rounds: int = 2
    search_for: str = "answer"
    start_design: str = "one_knob_at_a_time"
    start_combination: bool = True
    patience_trials: int | None = 3
    staging: bool = True
    report: bool = True


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


def given_settings(hydra_context: Any, config: DictConfig, keys: Iterable[str]) -> frozenset[str] | None:
    """Which of `keys` (hydra.sweeper settings) a config file of the app or the command line sets, as
    opposed to the sweeper's config dataclass: Hydra's defaults list is read again, file by file.
    None when Hydra's internals do not answer (a Hydra this was not written for)."""
    from hydra._internal.defaults_list import create_defaults_list
    from hydra.core.override_parser.overrides_parser import OverridesParser

    keys = frozenset(keys)
    try:
        lines = [*config.hydra.overrides.hydra, *config.hydra.overrides.task]
        fixed = [o.input_line for o in OverridesParser.create().parse_overrides(lines) if not o.is_sweep_override()]
        loader = hydra_context.config_loader
        parsed, repo = loader._parse_overrides_and_create_caching_repo(config.hydra.job.config_name, fixed)
        given = {o.key_or_group.split(".")[-1] for o in parsed
                 if o.key_or_group.rpartition(".")[0] == "hydra.sweeper"} & keys
        defaults = create_defaults_list(repo=repo, config_name=config.hydra.job.config_name, overrides_list=parsed,
                                        prepend_hydra=True, skip_missing=True).defaults
        for default in defaults:
            if default.config_path in (None, "hydra/sweeper/search", "hydra/config"):
                continue  # the sweeper's config dataclass (and Hydra's own) hold the defaults
            node = OmegaConf.select(loader._load_single_config(default, repo).config, "hydra.sweeper")
            if isinstance(node, DictConfig):
                given |= keys & set(node.keys())
    except Exception:  # noqa: BLE001 - private Hydra API: any change there means "cannot tell"
        return None
    return frozenset(given)

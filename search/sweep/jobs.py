"""The Hydra side of the sweep: composing a job's config from overrides,
and launching jobs through Hydra's launcher.

Under Hydra's basic launcher a job runs in this process; a trial's job is
composed once, when the trial is proposed, and that same config is run
(search/trial/composed_job.py). Other launchers (joblib, submitit) compose
and run their jobs themselves.

A user's own Hydra task may return plain numbers; `launch` names them
(search/sweep/metric_names.py, `named_values`) so that they are metrics.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf

from search.composition_errors import dotted_keys, first_line, fix_for
from search.errors import BadInput
from search.sweep.metric_names import named_values
from search.trial.composed_job import run_composed


def trial_config(job_config: DictConfig) -> dict[str, Any]:
    """The trial's config: the job's, resolved, without the `hydra` node (its
    per-job fields, job.num and sweep.subdir, exist only inside a launched job)."""
    keys = [key for key in job_config if key != "hydra"]
    return OmegaConf.to_container(OmegaConf.masked_copy(job_config, keys), resolve=True)


def result_of(ret: JobReturn) -> Any:
    """A job's return value, or a `crashed` result naming what the job raised."""
    if ret.status == JobStatus.COMPLETED:
        return ret.return_value
    err = ret._return_value
    return {"outcome": "crashed", "reason": f"{type(err).__name__}: {err}"}


@dataclass
class Jobs:
    hydra_context: Any
    config: DictConfig
    task_function: Any
    launcher: Any = None
    job_idx: int = 0
    value_names: list[str] | None = None  # a user's task: the names of the numbers it returns (planning.py)
    _composed: dict[tuple[str, ...], DictConfig] = field(default_factory=dict)  # by the overrides choosing files

    @classmethod
    def set_up(cls, hydra_context: Any, task_function: Any, config: DictConfig) -> "Jobs":
        launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)
        return cls(hydra_context, config, task_function, launcher)

    def runs_our_trials(self) -> bool:
        """The task is this package's app (objectives/ trials), not a user's own Hydra app."""
        return getattr(self.task_function, "__module__", "") == "search.trial.app"

    def run_here(self) -> bool:
        """Under the basic launcher, this process starts each trial's isolated child itself."""
        from hydra._internal.core_plugins.basic_launcher import BasicLauncher

        return isinstance(self.launcher, BasicLauncher) and self.runs_our_trials()

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """The Hydra job's config, `hydra` node included, as the launcher would compose it.

        Composing reads every config file again (0.2-0.5 s on two cores, per trial and per probe of
        the space), yet trials differ in values only: the config of the overrides that choose files
        (config groups, hydra.*) is composed once and kept, and the value overrides are applied to a
        copy of it by Hydra's own code, as Hydra applies them after composing."""
        try:
            return self._compose_from_cache(list(overrides))
        except Exception as err:  # Hydra's composition errors share no narrower base
            fix = fix_for(err, dotted_keys(self.config)) or "check the key's spelling in conf/"
            raise BadInput(f"every override must name a key of the config; {first_line(err)} (overrides: "
                           f"{' '.join(overrides)}); fix: {fix}") from None

    def _compose_from_cache(self, overrides: list[str]) -> DictConfig:
        import copy

        from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.core.override_parser.types import OverrideType
        from omegaconf import open_dict

        loader = self.hydra_context.config_loader
        parsed = OverridesParser.create().parse_overrides(overrides)
        values = [o for o in parsed if o.type == OverrideType.CHANGE and not o.is_hydra_override()
                  and not o.is_sweep_override() and o.package is None
                  and not loader.repository.group_exists(o.key_or_group)]
        if not values:
            return loader.load_sweep_config(self.config, overrides)
        chosen = tuple(o.input_line for o in parsed if all(o is not v for v in values))
        if chosen not in self._composed:
            self._composed[chosen] = loader.load_sweep_config(self.config, list(chosen))
        cfg = copy.deepcopy(self._composed[chosen])
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        app = [o for o in parsed if not o.is_hydra_override()]
        with open_dict(cfg.hydra):
            cfg.hydra.overrides.task = [o.input_line for o in app]
            cfg.hydra.job.override_dirname = get_overrides_dirname(
                overrides=app, kv_sep=cfg.hydra.job.config.override_dirname.kv_sep,
                item_sep=cfg.hydra.job.config.override_dirname.item_sep,
                exclude_keys=cfg.hydra.job.config.override_dirname.exclude_keys)
        return cfg

    def compose_trial(self, overrides: Sequence[str]) -> dict[str, Any]:
        return trial_config(self.compose(overrides))

    def default_study_name(self) -> str:
        """The objective's name (the workload: `digits`, a user's own name, or for `name: custom` the
        `_target_` of its model or its callable: objectives/objective_config.py), or a user's app's
        job name."""
        from objectives.objective_config import objective_label

        objective = self.config.get("objective")
        if isinstance(objective, DictConfig) and objective.get("name"):
            return objective_label(OmegaConf.to_container(objective, resolve=True))
        return str(self.config.hydra.job.name)

    def run_composed(self, job_config: DictConfig) -> JobReturn:
        """One job at a config composed already (the basic launcher's own path, minus composing)."""
        ret = run_composed(self.launcher, job_config, self.job_idx)
        self.job_idx += 1
        return ret

    def launch(self, overrides: list[list[str]]) -> list[JobReturn]:
        """Jobs composed and run by the launcher, as Hydra's own sweepers launch them."""
        returns = self.launcher.launch(overrides, initial_job_idx=self.job_idx)
        self.job_idx += len(overrides)
        for ret in returns:
            if self.value_names and ret.status == JobStatus.COMPLETED:
                ret.return_value = named_values(ret.return_value, self.value_names)
        return returns

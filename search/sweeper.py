"""The sweep: ask Optuna for a configuration, launch it as a Hydra job,
tell Optuna the result, keep MLflow in step.

Everything that can be wrong with the input is checked in `_plan` before a
study, an MLflow run or an output directory exists; a problem there is one
line and exit status 2.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import optuna
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from optuna.trial import TrialState

from search import tracking
from search.errors import BadInput, exit_bad_input
from search.progress import SweepProgress
from search.report import print_front
from search.space import Space, build_space, to_override
from search.study import (load_or_create, make_sampler, normalize_directions, objective_values, open_storage,
                          storage_location)

RUNNABLE = "runnable"  # constraint: 0 for a trial that ran, 1 for one the hardware could not run
INFEASIBLE_OUTCOMES = ("oom", "infeasible")


@dataclass
class Plan:
    space: Space
    directions: list[str]
    objectives: list[str] | None
    study_name: str
    storage: Any
    sampler: optuna.samplers.BaseSampler


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Nested config -> dotted keys, the names MLflow params and overrides use."""
    if isinstance(cfg, dict):
        out: dict[str, Any] = {}
        for key, value in cfg.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: cfg}


class SweeperImpl:
    def __init__(self, sampler: Any = None, direction: Any = "maximize", objectives: Any = None,
                 storage: str | None = None, study_name: str | None = None, n_trials: int = 20, n_jobs: int = 1,
                 seed: int | None = None, params: Any = None, experiment_name: str | None = None) -> None:
        to_py = lambda x: OmegaConf.to_container(x, resolve=True) if OmegaConf.is_config(x) else x  # noqa: E731
        self.sampler_cfg = to_py(sampler)
        self.direction = to_py(direction)
        self.objectives = to_py(objectives)
        self.storage = storage
        self.study_name = study_name
        self.n_trials = n_trials
        self.n_jobs = n_jobs
        self.seed = seed
        self.params = to_py(params) or {}
        self.experiment_name = experiment_name
        self.job_idx = 0

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.task_function = task_function
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    # -- planning: all validation, nothing created ---------------------------------------------

    def _compose(self, overrides: Sequence[str]) -> dict[str, Any]:
        try:
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        except (HydraException, Exception) as err:
            first = " ".join(str(err).split("\n")[0].split())
            raise BadInput(f"every override must name a key of the config; {first} (overrides: "
                           f"{' '.join(overrides)}); fix: check the key's spelling in conf/") from None
        with open_dict(cfg):
            del cfg["hydra"]  # its per-job fields (job.num, sweep.subdir) exist only inside a launched job
        return OmegaConf.to_container(cfg, resolve=True)

    def _check_knob_values(self, space: Space) -> None:
        """Compose the config at every categorical value and each numeric bound,
        and validate it the way the trial will, so a bad value never becomes a trial."""
        from objectives import ConfigError, parse_config

        probes: list[list[str]] = [[]]
        for key, dist in space.distributions.items():
            values = getattr(dist, "choices", None) or (dist.low, dist.high)
            probes += [[to_override(key, v)] for v in values]
        for extra in probes:
            try:
                parse_config(self._compose(space.fixed_overrides + extra))
            except ConfigError as err:
                raise BadInput(str(err)) from None

    def _default_study_name(self) -> str:
        objective = self.config.get("objective")
        if isinstance(objective, DictConfig) and objective.get("name"):
            return str(objective.name)
        return str(self.config.hydra.job.name)

    def _plan(self, arguments: list[str]) -> Plan:
        if self.n_trials < 1 or self.n_jobs < 1:
            raise BadInput(f"hydra.sweeper.n_trials and n_jobs must be >= 1; got n_trials={self.n_trials} "
                           f"n_jobs={self.n_jobs}; fix: hydra.sweeper.n_trials=20")
        space = build_space(self.params, arguments)
        directions = normalize_directions(self.direction, self.objectives)
        if getattr(self.task_function, "__module__", "") == "search.app":
            self._check_knob_values(space)
        else:
            for extra in [[]] + [[to_override(k, getattr(d, "choices", [getattr(d, "low", None)])[0])]
                                 for k, d in space.distributions.items()]:
                self._compose(space.fixed_overrides + extra)
        storage = open_storage(self.storage)
        sampler = make_sampler(self.sampler_cfg, self.seed, space.distributions)
        return Plan(space, directions, self.objectives, self.study_name or self._default_study_name(), storage, sampler)

    # -- the sweep -----------------------------------------------------------------------------

    def sweep(self, arguments: list[str]) -> optuna.Study:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            plan = self._plan(arguments)
            tracking.check_reachable()
            study, resumed = load_or_create(plan.study_name, plan.storage, plan.directions, plan.sampler)
        except BadInput as err:
            exit_bad_input(err)
        objectives = plan.objectives or [f"value_{i}" for i in range(len(plan.directions))]
        verb = "resuming" if resumed else "created"
        print(f"study {plan.study_name!r} {verb} ({len(study.trials)} trials so far) in "
              f"{storage_location(self.storage)}", flush=True)
        sweep = tracking.start_sweep(
            self.experiment_name or plan.study_name, plan.study_name,
            params={"n_trials": self.n_trials, "n_jobs": self.n_jobs, "directions": ",".join(plan.directions),
                    "objectives": ",".join(objectives), "sampler": type(plan.sampler).__name__,
                    **{f"space.{k}": repr(d) for k, d in plan.space.distributions.items()}},
            tags={"search.storage": storage_location(self.storage)},
        )
        status = "FAILED"
        try:
            with SweepProgress(self.n_trials, objectives) as progress:
                done = 0
                while done < self.n_trials:
                    batch = min(self.n_jobs, self.n_trials - done)
                    self._run_batch(study, plan, sweep, progress, batch)
                    done += batch
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        finally:
            completed = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
            tracking.end_sweep(sweep, status, {"trials_complete_in_study": len(completed)})
        print_front(study, objectives)
        print(f"MLflow: mlflow ui --backend-store-uri {tracking.tracking_uri()}   "
              f"(experiment {self.experiment_name or plan.study_name!r})", flush=True)
        return study

    def _run_batch(self, study: optuna.Study, plan: Plan, sweep: tracking.Sweep, progress: SweepProgress,
                   batch: int) -> None:
        trials = [study.ask(plan.space.distributions) for _ in range(batch)]
        overrides = [plan.space.fixed_overrides + [to_override(k, t.params[k]) for k in plan.space.distributions]
                     for t in trials]
        run_ids: list[str] = []
        try:
            for trial, lines in zip(trials, overrides):
                run_ids.append(tracking.start_trial(sweep, trial.number, flatten(self._compose(lines))))
                trial.set_user_attr("mlflow_run_id", run_ids[-1])
            progress.started([t.number for t in trials], trials[0].params)
            returns = self.launcher.launch(overrides, initial_job_idx=self.job_idx)
        except BaseException as err:
            reason = f"sweep interrupted: {type(err).__name__}"
            for trial, run_id in zip(trials, run_ids + [None] * batch):
                self._close(study, trial, sweep, run_id, {"outcome": "crashed", "reason": reason}, plan, progress)
            raise
        self.job_idx += batch
        for trial, run_id, ret in zip(trials, run_ids, returns):
            self._close(study, trial, sweep, run_id, _result_of(ret), plan, progress)

    def _close(self, study: optuna.Study, trial: optuna.Trial, sweep: tracking.Sweep, run_id: str | None,
               result: Any, plan: Plan, progress: SweepProgress) -> None:
        is_dict = isinstance(result, dict)
        outcome = result.get("outcome", "ok") if is_dict else "ok"
        reason = str(result.get("reason", "")) if is_dict else ""
        metrics = dict(result.get("metrics", {})) if is_dict else {}
        values = None
        if outcome == "ok":
            try:
                values = objective_values(result, plan.objectives, len(plan.directions))
            except (ValueError, TypeError) as err:
                outcome, reason = "crashed", f"bad objective values: {err}"
        trial.set_user_attr("outcome", outcome)
        trial.set_user_attr("reason", reason)
        trial.set_user_attr("metrics", {k: v for k, v in metrics.items() if isinstance(v, (int, float))})
        if values is not None:
            trial.set_constraint(RUNNABLE, 0.0)
            study.tell(trial, values)
        elif outcome in INFEASIBLE_OUTCOMES:
            # Told as a violated constraint, so the sampler learns where the
            # hardware's limit is; the placeholder values never rank (infeasible).
            trial.set_constraint(RUNNABLE, 1.0)
            study.tell(trial, [0.0 if d == "maximize" else float("inf") for d in plan.directions])
        else:
            study.tell(trial, state=TrialState.FAIL)
        if run_id is not None:
            info = result.get("info", {}) if is_dict else {}
            tracking.end_trial(sweep, run_id, outcome, metrics,
                               {"search.reason": reason, **{f"search.info.{k}": v for k, v in info.items()}})
        if values is not None and not metrics:
            metrics = dict(zip(progress.objectives, values))
        progress.finished(trial.number, outcome, metrics, trial.params, plan.directions, reason)


def _result_of(ret: JobReturn) -> Any:
    if ret.status == JobStatus.COMPLETED:
        return ret.return_value
    err = ret._return_value
    return {"outcome": "crashed", "reason": f"{type(err).__name__}: {err}"}

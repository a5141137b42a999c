"""The sweep: ask Optuna for a configuration, launch it as a Hydra job,
tell Optuna the result, keep MLflow in step.

Everything that can be wrong with the input is checked in `_plan` before a
study, an MLflow run or an output directory exists; a problem there is one
line and exit status 2.
"""
from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import optuna
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from search.measure import fingerprint
from search.measure import gpu_telemetry
from search.sweep import interrupt
from search.trial import isolate
from search.tracking import mlflow_repair
from search.nightly import night as nightly
from search.trial import slots
from search.tracking import mlflow_runs as tracking
from search.sweep.batch_probe import ProbeFailed, bound_batch_size, probe_overrides
from search.sweep.combinations import drop_clashes, parse_probes
from search.trial.composed_job import run_composed
from search.sweep.constraints import Constraint, parse_constraints
from search.commands.doctor import removed_values, runnable_knob_values
from search.sweep.early_stopping import (choose_mode, describe_mode, intermediate_series, make_pruner,
                                   trial_overrides)
from search.errors import EXIT_GAVE_UP, BadInput, Interrupted, exit_bad_input
from search.sweep.failure_policy import FailurePolicy
from search.measure.hardware import fit_to_machine
from search.trial.isolate import run_isolated
from search.sweep.metric_names import check_declared, declared_by, ended_ok, named_metrics, unreported
from search.sweep.no_repeat import ask_unseen
from search.sweep.outcome import score, tell
from search.reports.progress import SweepProgress
from search.sweep.recovery import HEARTBEAT_ATTR, RETRIES_ATTR, Heartbeat, close_stale, retry, stale_trials
from search.reports.tables import print_front
from search.sweep.settings import check_config, checked_trial
from search.sweep.space import Space, build_space, to_override
from search.commands.report import OBJECTIVES, write_report
from search.tracking.redact import keep_out_of_job_configs
from search.sweep.preflight import check_tracking_uri
from search.sweep.study import (SweepGridSampler, check_space_matches, check_storage, large_study_notice, load_or_create,
                          make_sampler, normalize_directions, open_storage, storage_location)

ACCURACY_METRICS = ("val_accuracy", "val_loss", "time_to_accuracy_s")
STOPPED_BY_ATTR = "search.stopped_by"  # the signal that stopped the trial with its sweep


@dataclass
class Plan:
    space: Space
    directions: list[str]
    objectives: list[str] | None
    constraints: list[Constraint]
    study_name: str
    storage: Any
    sampler: optuna.samplers.BaseSampler
    early_stopping: str = "off"  # pruner | staged | off (search/sweep/early_stopping.py)
    pruner: Any = None
    slots: list[slots.Slot] | None = None  # None: another launcher, batches of n_jobs
    confirm_metrics: list[str] | None = None  # names the first ok trial must report (search/sweep/metric_names.py)


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Nested config -> dotted keys, the names MLflow params and overrides use."""
    if isinstance(cfg, dict):
        out: dict[str, Any] = {}
        for key, value in cfg.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: cfg}


def trial_config(job_config: DictConfig) -> dict[str, Any]:
    """The trial's config: the job's, resolved, without the `hydra` node (its
    per-job fields, job.num and sweep.subdir, exist only inside a launched job)."""
    keys = [key for key in job_config if key != "hydra"]
    return OmegaConf.to_container(OmegaConf.masked_copy(job_config, keys), resolve=True)


class SweeperImpl:
    def __init__(self, sampler: Any = None, direction: Any = "maximize", objectives: Any = None,
                 storage: str | None = None, study_name: str | None = None, n_trials: int = 20, n_jobs: int = 1,
                 seed: int | None = None, params: Any = None, experiment_name: str | None = None,
                 constraints: Any = None, max_retries: int = 1, stale_after_s: float = 120.0,
                 max_failure_rate: float = 0.5, failure_min_trials: int = 4, batch_size_probe: bool = False,
                 nightly: Any = None, pruner: Any = None, early_stopping: bool = True,
                 early_stopping_margin: float = 0.1, early_stopping_startup_trials: int = 5, slots: Any = "auto",
                 trials_per_gpu: int = 1) -> None:
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
        self.constraints = to_py(constraints) or []
        self.max_retries = max_retries
        self.stale_after_s = stale_after_s
        self.failure_policy = FailurePolicy(max_failure_rate, failure_min_trials)
        self.batch_size_probe = batch_size_probe
        self.nightly = to_py(nightly) or {}
        self.slots_setting = slots
        self.trials_per_gpu = trials_per_gpu
        self._warming: Any = None  # the forkserver's warm-up thread, started by sweep() when trials run here
        self.job_idx = 0
        self.rng = random.Random(seed)
        self.pruner_cfg = to_py(pruner)
        self.early_stopping = early_stopping
        self.early_stopping_margin = early_stopping_margin
        self.early_stopping_startup_trials = early_stopping_startup_trials

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.task_function = task_function
        # Resolved once, before any job's config is composed: Hydra copies the resolved ${now:...} and
        # ${search.sweep_id:} into each job's config, so the jobs and the report share this directory.
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        keep_out_of_job_configs(config, self.storage)  # Hydra saves every job's config before it starts
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    # -- planning: all validation, nothing created ---------------------------------------------

    def _runs_our_trials(self) -> bool:
        """The task is this package's app (objectives/ trials), not a user's own Hydra app."""
        return getattr(self.task_function, "__module__", "") == "search.trial.app"

    def _compose_job(self, overrides: Sequence[str]) -> DictConfig:
        """The Hydra job's config, `hydra` node included, as the launcher would compose it."""
        try:
            return self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        except Exception as err:  # Hydra's composition errors share no narrower base
            first = " ".join(str(err).split("\n")[0].split())
            raise BadInput(f"every override must name a key of the config; {first} (overrides: "
                           f"{' '.join(overrides)}); fix: check the key's spelling in conf/") from None

    def _compose(self, overrides: Sequence[str]) -> dict[str, Any]:
        return trial_config(self._compose_job(overrides))

    def _check_knob_values(self, space: Space) -> tuple[list[Any], dict[str, str]]:
        """Compose the config at every categorical value and each numeric bound,
        and validate it the way the trial will, so a bad value never becomes a
        trial. Returns the parsed configs (objectives.TrialConfig) and the swept
        values that break a combination rule with a fixed value (search/sweep/combinations.py)."""
        from objectives import parse_config

        return parse_probes(space, lambda extra: parse_config(checked_trial(
            self._compose(space.fixed_overrides + extra))))

    def _default_study_name(self) -> str:
        objective = self.config.get("objective")
        if isinstance(objective, DictConfig) and objective.get("name"):
            return str(objective.name)
        return str(self.config.hydra.job.name)

    def _objectives_and_directions(self, measures_accuracy: bool) -> tuple[list[str] | None, list[str]]:
        """The configured objectives, less the accuracy ones when the workload
        measures no accuracy (throughput-only workloads): said once, never invented."""
        directions = normalize_directions(self.direction, self.objectives)
        if self.objectives is None or measures_accuracy:
            return self.objectives, directions
        name = self.config.objective.get("name")
        kept = [(o, d) for o, d in zip(self.objectives, directions) if o not in ACCURACY_METRICS]
        if not kept:
            raise BadInput(f"objective {name!r} measures no accuracy, so it cannot optimise {self.objectives}; "
                           f"fix: hydra.sweeper.objectives=[throughput_samples_per_s] hydra.sweeper.direction=maximize")
        if len(kept) < len(self.objectives):
            print(f"objective {name!r} measures no accuracy: single-objective sweep on "
                  f"{', '.join(o for o, _ in kept)}", flush=True)
        return [o for o, _ in kept], [d for _, d in kept]

    def _plan(self, arguments: list[str]) -> Plan:
        check_config(self.config, "hydra.sweeper")  # the numeric settings (search/sweep/settings.py)
        pruner = make_pruner(self.pruner_cfg)
        space = build_space(self.params, arguments)
        measures_accuracy, probed = True, []
        if self._runs_our_trials():
            probed, clashes = self._check_knob_values(space)  # first: an unknown value is wrong everywhere
            measures_accuracy = bool(probed[0].objective.measures_accuracy)
            space, removed = fit_to_machine(space, removed_values(), runnable_knob_values())
            if removed:
                print(f"removed from the search space, this machine cannot run them: {'; '.join(removed)}", flush=True)
            space, clashing = drop_clashes(space, clashes)
            if clashing:
                print(f"removed from the search space, they break a rule with a fixed value: {'; '.join(clashing)}",
                      flush=True)
        else:
            for extra in [[]] + [[to_override(k, getattr(d, "choices", [getattr(d, "low", None)])[0])]
                                 for k, d in space.distributions.items()]:
                self._compose(space.fixed_overrides + extra)
        objectives, directions = self._objectives_and_directions(measures_accuracy)
        constraints = parse_constraints(self.constraints)
        nightly_metric = self.nightly.get("metric") if self.nightly.get("enabled") else None
        named = named_metrics(objectives, constraints, nightly_metric)
        confirm = check_declared(named, declared_by(probed), self._default_study_name())
        _check_writable(self.sweep_dir)
        check_storage(self.storage)  # every external dependency answers before anything is created
        check_tracking_uri()
        if self.batch_size_probe and self._runs_our_trials():
            space = self._probe_batch_size(space)  # last: the cheap checks above fail first
        sampler = make_sampler(self.sampler_cfg, self.seed, space.distributions)
        name = self.study_name or self._default_study_name()
        storage = open_storage(self.storage)  # creates the journal file: after every check
        # Only this package's trials report a curve and run the probe, and only with an accuracy to report.
        trains_here = self._runs_our_trials() and measures_accuracy
        mode = choose_mode(self.early_stopping and trains_here, objectives, directions, pruner)
        return Plan(space, directions, objectives, constraints, name, storage, sampler, mode, pruner,
                    self._device_slots(), confirm)

    def _trials_run_here(self) -> bool:
        """Under the basic launcher, this process starts each trial's isolated child itself."""
        from hydra._internal.core_plugins.basic_launcher import BasicLauncher

        return isinstance(self.launcher, BasicLauncher) and self._runs_our_trials()

    def _device_slots(self) -> list[slots.Slot] | None:
        """Slots when this process runs the trials, else None (another launcher: batches)."""
        if not self._trials_run_here():
            return None
        from search.commands.doctor import gpus

        return slots.make_slots(self.slots_setting, self.trials_per_gpu, gpus().count)

    def _probe_batch_size(self, space: Space) -> Space:
        """Bound batch_size by what fits, measured in isolated probe trials before anything is created."""
        base = self._compose(space.fixed_overrides)
        micro_batches = int(base["parallel"]["devices"]) * int(base["parallel"]["grad_accum"])

        def run(batch_size: int) -> dict[str, Any]:
            cfg = self._compose(space.fixed_overrides + probe_overrides(batch_size, micro_batches))
            return run_isolated(cfg, timeout_s=float(cfg["trial"]["timeout_s"]))

        try:
            space, line = bound_batch_size(space, run)
        except ProbeFailed as err:
            raise BadInput(f"the batch-size probe needs its trials to end ok or out of memory; {err}; "
                           f"fix: run one trial at that configuration (python -m search run ...) to see why") from None
        print(line, flush=True)
        return space

    # -- the sweep -----------------------------------------------------------------------------

    def sweep(self, arguments: list[str]) -> optuna.Study:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        tracking.configure_client()
        if self._trials_run_here():  # the forkserver imports torch on the other core while the sweep is planned
            self._warming = isolate.warm_up()
        try:
            plan = self._plan(arguments)
            tracking.check_reachable()
            study, resumed = load_or_create(plan.study_name, plan.storage, plan.directions, plan.sampler)
            check_space_matches(study, plan.space.distributions)
        except BadInput as err:
            exit_bad_input(err)
        objectives = plan.objectives or [f"value_{i}" for i in range(len(plan.directions))]
        verb = "resuming" if resumed else "created"
        print(f"study {plan.study_name!r} {verb} ({len(study.trials)} trials so far) in "
              f"{storage_location(self.storage)}", flush=True)
        if (line := large_study_notice(plan.sampler, len(study.trials) + self.n_trials)) is not None:
            print(line, flush=True)
        print(describe_mode(plan.early_stopping, plan.pruner, self.early_stopping_margin), flush=True)
        self._recover(study)
        for line in mlflow_repair.repair(self.experiment_name or plan.study_name, study):  # an outage outlasted a sweep
            print(line, flush=True)
        self._fingerprint(study)
        study.set_user_attr(OBJECTIVES, objectives)
        night = nightly.start(self.nightly, study, plan.storage, plan.space.distributions) \
            if self.nightly.get("enabled") else None
        if (line := gpu_telemetry.notice()) is not None:
            print(line, flush=True)
        sweep = tracking.start_sweep(
            self.experiment_name or plan.study_name, plan.study_name,
            params={"n_trials": self.n_trials, "n_jobs": self.n_jobs, "directions": ",".join(plan.directions),
                    "slots": len(plan.slots) if plan.slots else "none (launcher batches)",
                    "objectives": ",".join(objectives), "sampler": type(plan.sampler).__name__,
                    "constraints": "; ".join(map(str, plan.constraints)) or "none",
                    "early_stopping": plan.early_stopping, "pruner": type(plan.pruner).__name__,
                    "early_stopping_margin": self.early_stopping_margin,
                    "early_stopping_startup_trials": self.early_stopping_startup_trials,
                    **{f"space.{k}": repr(d) for k, d in plan.space.distributions.items()}},
            tags={"search.storage": storage_location(self.storage), **fingerprint.as_tags(self.machine),
                  **(nightly.run_tags(night) if night else {})},
            sweep_dir=self.sweep_dir,
        )
        status, outcomes = "FAILED", []
        target = self.n_trials + (night.enqueued if night else 0)
        max_wall_s = self.nightly.get("max_wall_s") if night else None
        deadline = time.monotonic() + max_wall_s if max_wall_s else None
        try:
            with SweepProgress(target, objectives) as progress, Heartbeat(study) as heartbeat:
                topped_up = False
                while True:
                    if len(outcomes) >= target or (deadline is not None and time.monotonic() > deadline):
                        extra = 0 if topped_up or night is None else nightly.top_up(night)
                        topped_up, deadline = True, None  # tonight's best is topped up once, then the sweep ends
                        if not extra:
                            break
                        target = len(outcomes) + extra
                        progress.grow(target)
                    if isinstance(plan.sampler, SweepGridSampler) and plan.sampler.is_exhausted(study):
                        progress.console.print(f"every grid point has run: stopping after {len(outcomes)} new trials")
                        break
                    if plan.slots is not None:
                        outcomes += self._run_slots(study, plan, sweep, progress, heartbeat, outcomes,
                                                    target - len(outcomes), deadline)
                    else:
                        batch = min(self.n_jobs, target - len(outcomes))
                        outcomes += self._run_batch(study, plan, sweep, progress, heartbeat, batch)
                    if self.failure_policy.gives_up(outcomes):
                        break
            status = "FAILED" if self.failure_policy.gives_up(outcomes) else "FINISHED"
        except (KeyboardInterrupt, Interrupted):
            status = "KILLED"
            raise
        finally:
            completed = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
            tracking.end_sweep(sweep, status, {"trials_complete_in_study": len(completed)},
                               self.sweep_dir / tracking.UNLOGGED_FILE)
        print_front(study, objectives)
        report_dir = self.sweep_dir / "report"
        plot_files = write_report(study, report_dir, sweep.parent_run_id)
        night_status = nightly.finish(night, objectives, report_dir, sweep.parent_run_id, plot_files) if night else 0
        print(f"MLflow: {tracking.how_to_look()}   (experiment {self.experiment_name or plan.study_name!r})", flush=True)
        if self.failure_policy.gives_up(outcomes):
            print(f"search: gave up: {self.failure_policy.describe(outcomes)}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_GAVE_UP)
        if night_status:
            raise SystemExit(night_status)
        return study

    def _fingerprint(self, study: optuna.Study) -> None:
        """Record hardware and software on the study; warn when resuming on other ones."""
        self.machine = fingerprint.collect()
        before = fingerprint.from_tags(study.user_attrs)
        changes = fingerprint.diff(before, self.machine) if before else []
        if changes:
            print(f"warning: resuming study {study.study_name!r} on other hardware or software: "
                  f"{'; '.join(changes)}; its throughput figures are not comparable", flush=True)
        for key, value in fingerprint.as_tags(self.machine).items():
            study.set_user_attr(key, value)

    def _recover(self, study: optuna.Study) -> None:
        """Close what a killed sweep left RUNNING (Optuna FAIL, MLflow KILLED) and retry it."""
        for trial in stale_trials(study, self.stale_after_s):
            with interrupt.deferred():  # closed and enqueued again, or left for the next start: never half
                retried = close_stale(study, trial, self.max_retries)
            if retried is None:  # another worker closed it
                continue
            tracking.close_stale_runs(trial.user_attrs.get("mlflow_run_id"),
                                      trial.user_attrs.get("mlflow_parent_run_id"))
            print(f"trial {trial.number} was left running by a killed sweep: closed as failed"
                  f"{', enqueued again' if retried else ''}", flush=True)

    def _propose(self, study: optuna.Study, plan: Plan, sweep: tracking.Sweep, heartbeat: Heartbeat) -> slots.Launch:
        """Ask for the next trial and open its MLflow run. Trials that a worker
        killed meanwhile left running are closed first (another worker's, or
        a dead sweep's on this host), so their retries come next."""
        self._recover(study)
        trial = ask_unseen(study, plan.space.distributions, self.rng)
        lines = (plan.space.fixed_overrides + [to_override(k, trial.params[k]) for k in plan.space.distributions]
                 + trial_overrides(study, trial, plan.early_stopping, self.early_stopping_margin,
                                   self.early_stopping_startup_trials))
        heartbeat.track(trial)
        trial.set_user_attr("mlflow_parent_run_id", sweep.parent_run_id)
        trial.set_user_attr("overrides", lines)
        job_config = self._compose_job(lines)
        cfg = trial_config(job_config)
        run_id = tracking.start_trial(sweep, trial.number, flatten(cfg))
        if run_id is not None:
            trial.set_user_attr("mlflow_run_id", run_id)
        return slots.Launch(trial, lines, int((cfg.get("parallel") or {}).get("devices", 1)), job_config)

    def _run_slots(self, study: optuna.Study, plan: Plan, sweep: tracking.Sweep, progress: SweepProgress,
                   heartbeat: Heartbeat, before: list[str], budget: int, deadline: float | None) -> list[str]:
        """Every device slot takes the next trial as soon as its last one ends (search/trial/slots.py), until
        `budget` trials ran, the grid is used up or the deadline passed."""
        outcomes: list[str] = []

        def propose() -> slots.Launch | None:
            if isinstance(plan.sampler, SweepGridSampler) and plan.sampler.is_exhausted(study):
                return None
            if deadline is not None and time.monotonic() > deadline:
                return None
            return self._propose(study, plan, sweep, heartbeat)

        def start(launch: slots.Launch, taken: list[slots.Slot]) -> Any:
            visible = slots.cuda_visible_devices(taken)
            lines = launch.overrides + ([f"trial.visible_devices='{visible}'"] if visible else [])
            launch.trial.set_user_attr("search.slots", ",".join(str(s.index) for s in taken))
            launch.trial.set_user_attr("search.launched_unix_s", time.time())
            progress.started([launch.trial.number], launch.trial.params)
            with slots.detached_jobs():
                if visible is None:  # the config composed when the trial was proposed is this job's config
                    ret = run_composed(self.launcher, launch.job_config, self.job_idx)
                else:
                    ret = self.launcher.launch([lines], initial_job_idx=self.job_idx)[0]
            self.job_idx += 1
            return ret.return_value if ret.status == JobStatus.COMPLETED else _result_of(ret)

        def finish(launch: slots.Launch, result: Any) -> bool:
            launch.trial.set_user_attr("search.ended_unix_s", time.time())
            outcomes.append(self._close(study, launch.trial, sweep, result, plan, progress))
            heartbeat.untrack(launch.trial)
            return self.failure_policy.gives_up(before + outcomes)

        def abort(launch: slots.Launch, err: BaseException) -> None:
            self._abort(study, launch.trial, sweep, plan, progress, heartbeat, err)

        self._warming.join()  # here, not in start(): slots.run defers signals there, and torch imports take seconds
        slots.run(plan.slots or [], budget, propose, start, finish, abort)
        return outcomes

    def _run_batch(self, study: optuna.Study, plan: Plan, sweep: tracking.Sweep, progress: SweepProgress,
                   heartbeat: Heartbeat, batch: int) -> list[str]:
        """Another launcher (joblib, submitit): a batch of trials, launched together, awaited together."""
        trials, overrides = [], []
        try:
            for _ in range(batch):
                with interrupt.deferred():  # a trial asked for is in `trials`, so a signal can close it
                    launch = self._propose(study, plan, sweep, heartbeat)
                    trials.append(launch.trial)
                    overrides.append(launch.overrides)
            progress.started([t.number for t in trials], trials[0].params)
            returns = self.launcher.launch(overrides, initial_job_idx=self.job_idx)
        except BaseException as err:
            for trial in trials:
                self._abort(study, trial, sweep, plan, progress, heartbeat, err)
            raise
        self.job_idx += batch
        outcomes = []
        with interrupt.deferred():  # every trial of the batch ended: each is told, none closed as interrupted
            for trial, ret in zip(trials, returns):
                outcomes.append(self._close(study, trial, sweep, _result_of(ret), plan, progress))
                heartbeat.untrack(trial)
        return outcomes

    def _abort(self, study: optuna.Study, trial: optuna.Trial, sweep: tracking.Sweep, plan: Plan,
               progress: SweepProgress, heartbeat: Heartbeat, err: BaseException) -> None:
        """Close a trial the sweep stops without a result (SIGINT, SIGTERM: search/sweep/interrupt.py) as
        failed, naming why, and enqueue its configuration again: the trial measured nothing about it."""
        if isinstance(err, Interrupted):
            why = str(err)
            trial.set_user_attr(STOPPED_BY_ATTR, err.signal_name)
        elif isinstance(err, KeyboardInterrupt):
            why = "interrupted by SIGINT (Ctrl-C)"
            trial.set_user_attr(STOPPED_BY_ATTR, "SIGINT")
        else:
            why = f"stopped by {type(err).__name__}: {err}"
        self._close(study, trial, sweep, {"outcome": "crashed", "reason": f"sweep {why}"}, plan, progress)
        heartbeat.untrack(trial)
        retries = int(trial.user_attrs.get(RETRIES_ATTR, 0))
        if retry(study, trial, self.max_retries):
            progress.console.print(f"trial {trial.number}: enqueued again (retry {retries + 1} of "
                                   f"hydra.sweeper.max_retries={self.max_retries}): the next trial on this study runs it")
        else:
            progress.console.print(f"trial {trial.number}: not enqueued again: hydra.sweeper.max_retries="
                                   f"{self.max_retries} and it was retried {retries} time(s)")

    def _close(self, study: optuna.Study, trial: optuna.Trial, sweep: tracking.Sweep, result: Any, plan: Plan,
               progress: SweepProgress) -> str:
        refusal = None
        if plan.confirm_metrics and ended_ok(result):  # a user's function: its first ok trial shows what it reports
            refusal, plan.confirm_metrics = unreported(result, plan.confirm_metrics), None
        scored = score(result, plan.objectives, len(plan.directions), plan.constraints)
        tell(study, trial, scored, plan.directions)
        series = dict(result.get("series") or {}) if isinstance(result, dict) else {}
        if plan.early_stopping == "pruner":
            series.update(intermediate_series(study, trial))
        tracking.end_trial(sweep, trial.number, scored.outcome, scored.metrics,
                           {"search.reason": scored.reason, **{f"search.info.{k}": v for k, v in scored.info.items()},
                            **{k: str(v) for k, v in trial.user_attrs.items()
                               if k.startswith("search.") and k != HEARTBEAT_ATTR}},  # a heartbeat is not data
                           series)
        shown = scored.metrics or dict(zip(progress.objectives, scored.values or []))
        feasible = all(v <= 0 for v in scored.constraints.values())
        progress.finished(trial.number, scored.outcome, shown, trial.params, plan.directions, scored.reason, feasible)
        if refusal:
            exit_bad_input(BadInput(refusal))  # SystemExit: the sweep's run is ended on the way out
        return scored.outcome


def _check_writable(sweep_dir: Path) -> None:
    """Probe by making (and removing) a directory where the sweep's would go:
    permission bits alone say yes to root on read-only or virtual filesystems."""
    existing = next(p for p in (sweep_dir.absolute(), *sweep_dir.absolute().parents) if p.exists())
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".search-probe-", dir=existing))
    except OSError:
        raise BadInput(f"the sweep's output directory must be writable; got {sweep_dir} ({existing} is not writable); "
                       f"fix: hydra.sweep.dir=<a writable directory>") from None


def _result_of(ret: JobReturn) -> Any:
    if ret.status == JobStatus.COMPLETED:
        return ret.return_value
    err = ret._return_value
    return {"outcome": "crashed", "reason": f"{type(err).__name__}: {err}"}

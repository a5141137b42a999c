"""The sweep: plan it, open the study and MLflow, run the search, finish it, report.

The parts, each in its own module:

- search/sweep/planning.py: every check of the input, before anything exists
  (bad input is one line and exit status 2); the space, metrics, study,
  sampler, early-stopping mode and device slots.
- search/sweep/build.py: the search itself, the same for the sweep and its
  replay (scripts/bench/search_efficiency.py): the sampler as the search
  shows it the study, the policies, the engine (search/sweep/engine.py).
- search/sweep/trial_loop.py: ask the engine -> Hydra job -> result, per
  device slot or in launcher batches; search/sweep/closing.py tells Optuna
  and MLflow how each trial ended.
- search/sweep/ending.py: the study's last worker searching finishes the
  search: the confirmation, the hooks' top-ups.
- search/sweep/hooks.py: what a kind of sweep adds (nightly:
  search/nightly/sweep_hooks.py).

Hydra registers it through the thin plugin in hydra_plugins/search_sweeper.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from search.errors import BadInput, Interrupted, exit_bad_input
from search.leave import exit_is_ours
from search.measure import fingerprint, gpu_telemetry
from search.record import APP_ATTR, OK, STOPPED_EARLY, THROUGHPUT, TOLERANCE_ATTR, Answer, outcome
from search.reports.answer import answer_metrics, answer_throughputs
from search.reports.progress import SweepProgress
from search.reports.tables import say
from search.sweep import build, import_ahead, workers
from search.sweep.baseline import as_run_here, baseline_params, fit_baseline
from search.sweep.early_stopping import describe_mode
from search.sweep.ending import Confirmation, TopUp, finish_once
from search.sweep.engine import Engine, Start
from search.sweep.failure_policy import FailurePolicy
from search.sweep.fixed_config import check_fixed, fixed_record
from search.sweep.gp_view import asks_for_answer
from search.sweep.hooks import HookStart, NoHooks
from search.sweep.jobs import Jobs
from search.sweep.planning import Plan, plan_sweep
from search.sweep.recipe import facts_here
from search.sweep.recovery import Heartbeat
from search.sweep.staging import staging_applies
from search.sweep.start_design import starts_from_design
from search.sweep.study import (GP_IMPORTS, SweepGridSampler, app_command, check_space_matches, large_study_notice,
                                load_or_create, make_sampler, name_metrics, storage_location, study_identity)
from search.sweep.sweep_params import run_params, run_tags
from search.sweep.sweep_report import report
from search.sweep.sweep_settings import sweep_settings
from search.sweep.trial_loop import SweepRun, recover, run_enqueued, run_trials
from search.tracking import mlflow_client, mlflow_repair
from search.tracking import mlflow_runs as tracking
from search.tracking.redact import keep_out_of_job_configs
from search.trial import isolate


class SweeperImpl:
    def __init__(self, **settings: Any) -> None:
        """`settings` are hydra.sweeper's (hydra_plugins/search_sweeper: SearchSweeperConf)."""
        from search.nightly.sweep_hooks import sweep_hooks

        self.settings = sweep_settings(**settings)
        self.hooks = sweep_hooks(self.settings.nightly)
        self.failure_policy = FailurePolicy(self.settings.max_failure_rate, self.settings.failure_min_trials)
        self.baseline: tuple[dict[str, Any], int | None] | None = None  # the user's configuration and seed
        self._warming: Any = None  # the forkserver's warm-up thread, when trials run here
        self._sampler_imports: tuple[str, ...] = ()  # what the sampler imports at its first model-based ask
        self._importing: threading.Thread | None = None  # import_ahead's thread
        self._import_wanted = False  # the trials run in this process's forkserver: import ahead once one runs
        self._imported_enough = threading.Event()  # which stops at its next module when set

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self.config = config
        # Resolved once, before any job's config is composed: Hydra copies the resolved ${now:...} and
        # ${search.sweep_id:} into each job's config, so the jobs and the report share this directory.
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        keep_out_of_job_configs(config, self.settings.storage)  # Hydra saves every job's config before it starts
        self.jobs = Jobs.set_up(hydra_context, task_function, config)

    def sweep(self, arguments: list[str]) -> optuna.Study:
        try:
            return self._sweep(arguments)
        finally:
            self._imported_enough.set()  # no module more
            if self._importing is not None and not exit_is_ours():  # a user's app: joined before Python's exit
                self._importing.join()  # begins (import_ahead says why); `python -m search` does not wait

    def _sweep(self, arguments: list[str]) -> optuna.Study:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        mlflow_client.configure_client()
        if self.jobs.run_here():  # the forkserver imports torch on the other core while the sweep is planned
            self._warming = isolate.warm_up()  # started already by the app's Hydra callback: its thread
        try:
            plan = plan_sweep(self.settings, self.jobs, self.hooks, self.sweep_dir, arguments)
            self._sampler_imports = GP_IMPORTS if isinstance(plan.sampler, optuna.samplers.GPSampler) else ()
            self.baseline = self._baseline(plan)
            plan.for_answer = self.baseline is not None and self.settings.search_for == "answer" \
                and asks_for_answer(plan.metrics, plan.directions)  # the one place that decides it
            staging = self.settings.staging and staging_applies(plan, self.jobs)
            mlflow_client.check_reachable()
            study, resumed = load_or_create(plan.study_name, plan.storage, plan.directions, build.search_sampler(
                plan.sampler, self.settings, plan.space, plan.metrics, plan.directions, plan.for_answer, staging))
            check_space_matches(study, plan.space.distributions)
            fixed_note = check_fixed(study, fixed_record(self._fixed_config(plan), plan.constraints), resumed)
        except BadInput as err:
            exit_bad_input(err)
        for line in plan.said:
            say(line)
        metric_names = plan.metrics or [f"value_{i}" for i in range(len(plan.directions))]
        facts = facts_here(plan.hardware) if plan.hardware is not None else None
        policies = build.policies(self.settings, plan.space, plan.sampler, plan.for_answer, staging,
                                  plan.early_stopping, self.baseline, facts, [HookStart(self.hooks, plan.storage)])
        engine = build.engine(study, plan.space, self.settings, plan.metrics, plan.directions, plan.constraints,
                              plan.for_answer, policies,
                              plan.sampler if isinstance(plan.sampler, SweepGridSampler) else None)
        extra = self._open(study, plan, resumed, metric_names, fixed_note, engine)
        try:
            sweep = tracking.start_sweep(self.settings.experiment_name or plan.study_name, plan.study_name,
                                         params=run_params(self.settings, plan, metric_names, self._designed(plan),
                                                           build.patience_trials(self.settings, plan.for_answer,
                                                                                 plan.sampler)),
                                         tags={**run_tags(self.jobs.default_study_name(), plan.space.fixed_overrides),
                                               **fingerprint.as_tags(self.machine), **self.hooks.run_tags()},
                                         sweep_dir=self.sweep_dir,
                                         study_identity=study_identity(study, self.settings.storage,
                                                                        workers.first_registration(study)))
        except Exception:  # MLflow went away since it was checked: the study keeps its enqueued trials for a re-run
            workers.mark(study, "done")  # and no other worker waits on this one to finish searching
            raise
        run: SweepRun | None = None
        status = "FAILED"
        answer: Answer | None = None
        last = True  # this worker is the study's last searching: it confirms, tops up and reports
        try:
            with SweepProgress(self.settings.n_trials + extra, metric_names) as progress, \
                    Heartbeat(study, on_beat=lambda: workers.beat(study)) as heartbeat:
                run = SweepRun(self.settings, self.jobs, plan, study, sweep, progress, heartbeat, engine.rng,
                               self.failure_policy, self._wait_for_forkserver, self._trial_running, engine=engine,
                               staging=staging)
                try:
                    run_trials(run, self.hooks, self.settings.n_trials + extra)
                finally:
                    workers.mark(study, "done")  # however the trials ended: the others may confirm
                if not self.failure_policy.gives_up(run.outcomes):
                    answer, last = self._finish(run, engine)
            status = "FAILED" if self.failure_policy.gives_up(run.outcomes) else "FINISHED"
        except (KeyboardInterrupt, Interrupted):
            status = "KILLED"
            raise
        finally:
            workers.mark(study, "done")  # again, the heartbeat stopped: a beat may have re-marked the state it read
            completed = [t for t in study.get_trials(deepcopy=False)
                         if t.state == TrialState.COMPLETE and outcome(t, unrecorded=OK) != STOPPED_EARLY]
            tracking.end_sweep(sweep, status, {"trials_complete_in_study": len(completed), **answer_metrics(answer),
                                               **answer_throughputs(study, answer)},
                               self.sweep_dir / tracking.UNLOGGED_FILE)
        # No module more imported ahead: warnings.catch_warnings is not thread-safe, and an import beside the
        # report's plots can undo their filters; the report imports what it still needs itself.
        self._imported_enough.set()
        return report(self, study, plan, sweep, metric_names, run, answer, last)

    def _baseline(self, plan: Plan) -> tuple[dict[str, Any], int | None] | None:
        """The user's own configuration and its seed, the space widened to hold it; None: no baseline
        (hydra.sweeper.baseline_repeats=0, or a sweep that does not optimise throughput)."""
        if self.settings.baseline_repeats < 1 or THROUGHPUT not in (plan.metrics or []):
            return None
        params, seed = baseline_params(self.jobs.compose_trial, plan.space)
        params, resolved = as_run_here(plan.space, params)
        space, notes = fit_baseline(plan.space, params)
        for line in resolved + notes:
            say(line)
        if notes and notes[0].startswith("no baseline"):
            return None
        if space.distributions != plan.space.distributions:
            plan.space = space
            plan.sampler = make_sampler(self.settings.sampler, self.settings.seed, space.distributions)
        return params, seed

    def _designed(self, plan: Plan) -> bool:
        return starts_from_design(self.settings.start_design, plan.for_answer, plan.sampler)

    def _finish(self, run: SweepRun, engine: Engine) -> tuple[Answer | None, bool]:
        """The study's last worker searching confirms the answer (with a baseline) and runs the hooks' top-ups; with
        neither to do, no worker waits for it. The answer, and whether this worker is that last one."""
        confirmation = Confirmation(run, self.baseline) if self.baseline is not None else None
        engine.policies = [*engine.policies, *([confirmation] if confirmation else []),
                           TopUp(run, self.hooks, confirmation)]
        if confirmation is None and isinstance(self.hooks, NoHooks):
            return None, True

        def run_more(count: int) -> None:
            run.progress.grow(len(run.outcomes) + count)
            run_enqueued(run, count)

        last = finish_once(run, engine, run_more, confirms=confirmation is not None)
        return (confirmation.answer if confirmation is not None else None), last

    def _fixed_config(self, plan: Plan) -> dict[str, Any]:
        """The config your configuration's trials share (conf/ and the fixed overrides), unresolved, without the
        `hydra` node: what search/sweep/fixed_config.py records on the study."""
        composed = self.jobs.compose(plan.space.fixed_overrides)
        return OmegaConf.to_container(OmegaConf.masked_copy(composed, [k for k in composed if k != "hydra"]),
                                      resolve=False)

    def _open(self, study: optuna.Study, plan: Plan, resumed: bool, metric_names: list[str],
              fixed_note: str | None, engine: Engine) -> int:
        """Say what is being swept, close what a killed sweep left, record the machine, start the search (its
        policies' first trials); the hooks' trials enqueued on top of n_trials."""
        verb = "resuming" if resumed else "created"
        say(f"study {plan.study_name!r} {verb} ({len(study.trials)} trials so far) in "
            f"{storage_location(self.settings.storage)}")
        if fixed_note is not None:
            say(fixed_note)
        if (line := large_study_notice(plan.sampler, len(study.trials) + self.settings.n_trials)) is not None:
            say(line)
        say(describe_mode(plan.early_stopping, plan.pruner, self.settings.early_stopping_margin, plan.for_answer))
        if (patience := build.patience_trials(self.settings, plan.for_answer, plan.sampler)) is not None:
            say(f"patience: the search ends once {patience} trials the sampler proposed end in a row without "
                f"making the fastest configuration at your accuracy faster by more than noise, and no one-knob "
                f"move from it is left that could (hydra.sweeper.patience_trials=null runs every trial of n_trials)")
        # First: a worker about to confirm sees this one (search/sweep/workers.py); then nothing is enqueued here
        # while another worker confirms: it would take this worker's baseline runs, retries or nightly repeats as
        # its rounds.
        workers.mark(study, "searching")
        workers.wait_while_confirming(study, self.settings.stale_after_s, say)
        recover(study, self.settings)
        for line in mlflow_repair.repair(self.settings.experiment_name or plan.study_name, study):
            say(line)  # an MLflow outage outlasted an earlier sweep
        self._fingerprint(study)
        name_metrics(study, metric_names)  # the axes' names in optuna-dashboard too
        study.set_user_attr(TOLERANCE_ATTR, self.settings.accuracy_tolerance)  # export's floor without an answer
        workers.drop_stopped_confirmation(study, self.settings.stale_after_s)
        start = Start(first=workers.enqueues_baseline(study, self.settings.stale_after_s),  # the first enqueues
                      others_searching=bool(workers.others_searching(study, self.settings.stale_after_s)))
        for line in engine.begin(start):
            say(line)
        earlier = self.hooks.earlier_studies()  # a killed night is never resumed: what it left is closed here
        for past in earlier:
            recover(past, self.settings, retry=False)
        for line in mlflow_repair.repair(self.settings.experiment_name or plan.study_name, *earlier):
            say(line)
        if (line := gpu_telemetry.notice()) is not None:
            say(line)
        return start.enqueued

    def _fingerprint(self, study: optuna.Study) -> None:
        """Record hardware and software on the study; warn when resuming on other ones."""
        self.machine = fingerprint.collect()
        changes = fingerprint.changes_since(fingerprint.from_tags(study.user_attrs), self.machine)
        if changes:
            print(f"warning: resuming study {study.study_name!r} on other hardware or software: "
                  f"{'; '.join(changes)}; its throughput figures are not comparable", flush=True)
        for key, value in fingerprint.as_tags(self.machine).items():
            study.set_user_attr(key, value)
        study.set_user_attr(APP_ATTR, app_command(self.jobs.runs_our_trials()))  # export's "reproduce" line

    def _wait_for_forkserver(self) -> None:
        if self._warming is not None:
            self._warming.join()
            self._warming = None
            self._import_wanted = True

    def _trial_running(self) -> None:
        """A trial was launched: what the sampler imports at its first model-based ask, and the report's, are
        imported ahead from now on, while this process waits on its first trial; not between two trials or
        after the last, and not before the first trial runs, where the imports' thread took the GIL from the
        first trial's proposal (its config composed, its MLflow run made)."""
        if self._import_wanted and self._importing is None:
            self._importing = import_ahead.import_ahead(self._sampler_imports, self.settings.report,
                                                        self._imported_enough)

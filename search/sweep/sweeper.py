"""The sweep: plan it, open the study and MLflow, run the trials, report.

The parts, each in its own module:

- search/sweep/planning.py: every check of the input, before anything exists
  (bad input is one line and exit status 2); the space, metrics, study,
  sampler, early-stopping mode and device slots.
- search/sweep/trial_loop.py: ask -> overrides -> Hydra job -> result, per
  device slot or in launcher batches; search/sweep/closing.py tells Optuna
  and MLflow how each trial ended.
- search/sweep/hooks.py: what a kind of sweep adds (nightly:
  search/nightly/sweep_hooks.py), called at start, at the end of the
  trials and after the report.

Hydra registers it through the thin plugin in hydra_plugins/search_sweeper.
"""
from __future__ import annotations

import importlib
import random
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from search.errors import EXIT_GAVE_UP, BadInput, Interrupted, exit_bad_input
from search.leave import IMPORT_AHEAD_THREAD, exit_is_ours
from search.measure import fingerprint, gpu_telemetry
from search.measure.spare_cpu import spare_cores
from search.record import (ANSWER_ATTR, APP_ATTR, CONFIRMATION_ROLES, MLFLOW_RUN_ID_ATTR, OK, STOPPED_EARLY, THROUGHPUT,
                           TOLERANCE_ATTR, Answer, outcome, role)
from search.reports.answer import answer_metrics, answer_throughputs, print_answer, tag_sweep_run
from search.reports.plots import preload as preload_plots, write_report
from search.reports.progress import SweepProgress
from search.reports.tables import compare_label, compare_run_ids, front_trials, print_front, say
from search.sweep import workers
from search.sweep.answer import no_idle
from search.sweep.baseline import (as_run_here, baseline_params, baseline_trials, enqueue_baseline, fit_baseline,
                                   not_measured)
from search.sweep.confirm import confirm, overrides_for, runs_of
from search.sweep.early_stopping import describe_mode
from search.sweep.failure_policy import FailurePolicy
from search.sweep.fixed_config import check_fixed, fixed_record
from search.sweep.gp_view import asks_for_answer, gp_view
from search.sweep.hooks import NoHooks
from search.sweep.jobs import Jobs
from search.sweep.per_second import Known
from search.sweep.planning import Plan, plan_sweep
from search.sweep.recovery import Heartbeat, worker_id
from search.sweep.reproduce import configuration_overrides, paste_line
from search.sweep.roles import put_back, set_aside_waiting
from search.sweep.rule_sampler import within_rules
from search.sweep.settled import Settled, at_floor, below_floor
from search.sweep.staging import staging_applies
from search.sweep.start_design import (deferred, enqueue_deferred, enqueue_start, not_moved_alone, one_knob_at_a_time,
                                      start_line, starts_from_design)
from search.sweep.study import (GP_IMPORTS, app_command, check_space_matches, large_study_notice, load_or_create,
                                make_sampler, name_metrics, storage_location, study_identity)
from search.sweep.sweep_settings import sweep_settings
from search.sweep.trial_loop import SweepRun, recover, run_enqueued, run_trials
from search.tracking import mlflow_client, mlflow_repair
from search.tracking import mlflow_runs as tracking
from search.tracking.redact import keep_out_of_job_configs
from search.trial import isolate

SPARE_CORES = 0.75  # idle cores (of a core) a module imported ahead needs: the trial's own core is never shared
SPARE_SAMPLE_S = 0.1  # the sample each import waits for


class SweeperImpl:
    def __init__(self, **settings: Any) -> None:
        """`settings` are hydra.sweeper's (hydra_plugins/search_sweeper: SearchSweeperConf)."""
        from search.nightly.sweep_hooks import sweep_hooks

        self.settings = sweep_settings(**settings)
        self.hooks = sweep_hooks(self.settings.nightly)
        self.failure_policy = FailurePolicy(self.settings.max_failure_rate, self.settings.failure_min_trials)
        self.rng = random.Random(self.settings.seed)
        self.baseline: tuple[dict[str, Any], int | None] | None = None  # the user's configuration and seed
        self._warming: Any = None  # the forkserver's warm-up thread, when trials run here
        self._sampler_imports: tuple[str, ...] = ()  # what the sampler imports at its first model-based ask
        self._importing: threading.Thread | None = None  # _import_ahead's thread
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
                self._importing.join()  # begins (_import_ahead says why); `python -m search` does not wait

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
            mlflow_client.check_reachable()
            study, resumed = load_or_create(plan.study_name, plan.storage, plan.directions,
                                            within_rules(self._directed(plan), plan.space.forbids,
                                                         self.settings.seed, plan.space.runs_as,
                                                         *self._settled(plan)))
            check_space_matches(study, plan.space.distributions)
            fixed_note = check_fixed(study, fixed_record(self._fixed_config(plan), plan.constraints), resumed)
        except BadInput as err:
            exit_bad_input(err)
        for line in plan.said:
            say(line)
        metric_names = plan.metrics or [f"value_{i}" for i in range(len(plan.directions))]
        extra = self._open(study, plan, resumed, metric_names, fixed_note)
        try:
            sweep = tracking.start_sweep(self.settings.experiment_name or plan.study_name, plan.study_name,
                                         params=self._run_params(plan, metric_names),
                                         tags={**self._run_tags(plan), **fingerprint.as_tags(self.machine),
                                               **self.hooks.run_tags()},
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
                run = SweepRun(self.settings, self.jobs, plan, study, sweep, progress, heartbeat, self.rng,
                               self.failure_policy, self._wait_for_forkserver, self._trial_running,
                               staging=self.settings.staging and staging_applies(plan, self.jobs),
                               patience_trials=self._patience_trials(plan))
                try:
                    run_trials(run, self.hooks, self.settings.n_trials + extra)
                finally:
                    workers.mark(study, "done")  # however the trials ended: the others may confirm
                if not self.failure_policy.gives_up(run.outcomes):
                    # the last worker searching confirms and tops up; with neither to do, no worker waits for it
                    elect = self.baseline is not None or not isinstance(self.hooks, NoHooks)
                    answer, last = self._confirm_once(run, plan) if elect else (None, True)
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
        return self._report(study, plan, sweep, metric_names, run.outcomes, answer, last)

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

    def _directed(self, plan: Plan) -> optuna.samplers.BaseSampler:
        """The sampler as search/sweep/gp_view.py shows it the study: searching for the answer once the
        baseline's accuracy is known (plan.for_answer), with staging its pick weighing each configuration's
        cost (search/sweep/per_second.py); otherwise for the front."""
        below, reached = self._settled(plan)  # searching for the answer with staging: what each maths costs
        known = Known(reached, below, plan.space.forbids, plan.space.runs_as) if reached is not None else None
        return gp_view(plan.sampler, "answer" if plan.for_answer else "front",
                       plan.metrics, plan.directions, self.settings.accuracy_tolerance,
                       same_maths=staging_applies(plan, self.jobs), known=known)

    def _settled(self, plan: Plan) -> tuple[Settled | None, Settled | None]:
        """Searching for the answer with staging: the maths whose configurations cannot be the answer, and
        those whose unseen configurations are only timed, as the sampler wrapper reads them
        (search/sweep/settled.py); None and None otherwise."""
        if not (plan.for_answer and self.settings.staging and staging_applies(plan, self.jobs)):
            return None, None
        return (below_floor(self.settings.accuracy_tolerance, plan.space.runs_as),
                at_floor(self.settings.accuracy_tolerance, plan.space.runs_as))

    def _confirm_once(self, run: SweepRun, plan: Plan) -> tuple[Answer | None, bool]:
        """Confirm here (with a baseline) when this is the study's last worker searching (search/sweep/workers.py):
        the answer, and whether this worker is that last one. It alone runs the hooks' top-ups (nightly's whole
        runs of tonight's result), which the others would repeat, or run for another configuration while the
        search goes on, with or without a baseline: still marked `confirming`, so a worker that joins meanwhile
        waits instead of taking them."""
        say = self._say(run) if self.baseline is not None else (lambda line: None)
        workers.mark(run.study, "confirming")  # first: a worker that joins from now on waits for it
        try:
            others = workers.others_searching(run.study, self.settings.stale_after_s)
            if others:
                say(f"confirmation: left to the last worker still searching this study ({len(others)} other(s): "
                    f"{', '.join(others)}); it stores the answer on the study and on its MLflow sweep run")
                return None, False
            if not workers.claims_confirmation(run.study, self.settings.stale_after_s):
                say("confirmation: another worker of this study, ended at the same moment, confirms the answer")
                return None, False
            answer = self._confirm(run, plan) if self.baseline is not None else None
            if self._top_up(run) and answer is not None:
                self._store(run, answer)  # its runs, the top-ups among them
            return answer, True
        finally:
            workers.mark(run.study, "done")

    @staticmethod
    def _say(run: SweepRun) -> Any:
        """A line above the progress display, printed as it is: it holds overrides and values (a
        ``hydra.searchpath=[file://...]``) that rich would read as markup and swallow."""
        return lambda line: run.progress.console.print(line, markup=False, highlight=False)

    def _confirm(self, run: SweepRun, plan: Plan) -> Answer | None:
        """Confirm the answer (search/sweep/confirm.py), store it on the study and MLflow's sweep run."""
        assert self.baseline is not None
        params, seed = self.baseline

        aside = set_aside_waiting(run.study)  # proposals the search did not reach: not run as its rounds

        def run_more(count: int) -> None:
            # a trial enqueued since (a killed trial's retry, by recover() here or by a worker that joined) would
            # run in place of a round: only the confirmation's own trials wait while it runs
            aside.extend(set_aside_waiting(run.study, keep=lambda t: role(t) in CONFIRMATION_ROLES))
            run.progress.grow(len(run.outcomes) + count)
            run_enqueued(run, count)

        try:
            answer = confirm(run, run_more, params, seed, lambda p: overrides_for(plan.space.fixed_overrides, p),
                             self._say(run), plan.space.unused or no_idle,
                             OmegaConf.select(run.jobs.config, "train"), workers.registered_unix_s(run.study))
        finally:
            put_back(run.study, aside)
        if answer is not None and not answer.standing:
            answer.confirmed_unix_s, answer.confirmed_by = time.time(), worker_id()
        if answer is not None:
            self._store(run, answer)
        return answer

    def _store(self, run: SweepRun, answer: Answer) -> None:
        """The answer, with every run of its configuration at the study's seed, on the study and MLflow's sweep run;
        another worker's answer that stands (confirm.standing_answer) on this worker's sweep run only: the study
        keeps it as its confirmer stored it."""
        answer.trials = runs_of(run.study, answer.params)
        if not answer.standing:
            run.study.set_user_attr(ANSWER_ATTR, answer.to_dict())
        tag_sweep_run(run.sweep.parent_run_id, answer)

    def _top_up(self, run: SweepRun) -> int:
        """The hooks' last trials (nightly: whole runs of tonight's answer, search/nightly/night.py), after the
        confirmation named it and ahead of any proposal still waiting; how many ran."""
        extra = self.hooks.top_up()
        if extra:
            aside = set_aside_waiting(run.study, keep_newest=extra)
            try:
                run.progress.grow(len(run.outcomes) + extra)
                run_enqueued(run, extra)
            finally:
                put_back(run.study, aside)
        return extra

    def _fixed_config(self, plan: Plan) -> dict[str, Any]:
        """The config your configuration's trials share (conf/ and the fixed overrides), unresolved, without the
        `hydra` node: what search/sweep/fixed_config.py records on the study."""
        composed = self.jobs.compose(plan.space.fixed_overrides)
        return OmegaConf.to_container(OmegaConf.masked_copy(composed, [k for k in composed if k != "hydra"]),
                                      resolve=False)

    def _open(self, study: optuna.Study, plan: Plan, resumed: bool, metric_names: list[str],
              fixed_note: str | None = None) -> int:
        """Say what is being swept, close what a killed sweep left, record the machine; the hooks'
        trials enqueued on top of n_trials."""
        verb = "resuming" if resumed else "created"
        say(f"study {plan.study_name!r} {verb} ({len(study.trials)} trials so far) in "
            f"{storage_location(self.settings.storage)}")
        if fixed_note is not None:
            say(fixed_note)
        if (line := large_study_notice(plan.sampler, len(study.trials) + self.settings.n_trials)) is not None:
            say(line)
        say(describe_mode(plan.early_stopping, plan.pruner, self.settings.early_stopping_margin, plan.for_answer))
        if (patience := self._patience_trials(plan)) is not None:
            say(f"patience: the search ends once {patience} trials the sampler proposed end in a "
                f"row without making the fastest configuration at your accuracy faster by more than noise "
                f"(hydra.sweeper.patience_trials=null runs every trial of n_trials)")
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
        first = workers.enqueues_baseline(study, self.settings.stale_after_s)  # the first worker enqueues
        fresh = self._enqueue_baseline(study, first)
        # The hooks' runs next (nightly's repeats of last night's answer), ahead of the search's: they run whatever
        # the time (hooks.max_wall_s), and Optuna hands out waiting trials oldest first.
        extra = self.hooks.start(study, plan.storage, plan.space.distributions, first)
        if self.baseline is not None and fresh:
            self._start_design(study, plan, self.baseline[0], room=self.settings.n_trials - fresh)
        elif self.baseline is not None and first:  # a killed sweep's waiting trials run first
            waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
            if moves := enqueue_deferred(study, room=self.settings.n_trials - waiting):
                left = len(deferred(study))
                say(f"start: {len(moves)} move(s) an earlier sweep of this study had no room for run "
                    + (f"after the {waiting} trial(s) waiting before them" if waiting else "first") + " ("
                    + ", ".join(f"{knob}={p[knob]}" for knob, p in moves) + ")"
                    + (f"; {left} more wait for a later sweep" if left else ""))
        earlier = self.hooks.earlier_studies()  # a killed night is never resumed: what it left is closed here
        for past in earlier:
            recover(past, self.settings, retry=False)
        for line in mlflow_repair.repair(self.settings.experiment_name or plan.study_name, *earlier):
            say(line)
        if (line := gpu_telemetry.notice()) is not None:
            say(line)
        return extra

    def _enqueue_baseline(self, study: optuna.Study, first: bool) -> int:
        """Your configuration's runs, by the study's first worker, and the line saying so; how many were enqueued
        into a fresh study (one that held nothing else: its start design follows), else 0."""
        if self.baseline is None:
            return 0
        params, seed = self.baseline
        shown = " ".join(f"{k}={v}" for k, v in params.items())
        if first:
            unmeasured = len(not_measured(study))
            runs = enqueue_baseline(study, params, self.settings.baseline_repeats, seed)
            said = f"runs first, {runs} time(s), never stopped early" if runs else "measured already in this study"
            if runs and unmeasured:
                said += f" (again: {unmeasured} earlier run(s) of it in this study ended without a measurement)"
        else:
            runs, said = 0, "enqueued by the first worker of this study"
        say(f"baseline, your configuration ({shown}): {said}")
        return runs if runs and len(study.trials) == len(baseline_trials(study)) else 0

    def _starts_from_design(self, plan: Plan) -> bool:
        return starts_from_design(self.settings.start_design, plan.for_answer, plan.sampler)

    def _patience_trials(self, plan: Plan) -> int | None:
        """hydra.sweeper.patience_trials where it applies: searching for the answer with the GP after the start
        design (search/sweep/patience.py: the design's trials are what the rule counts on); None otherwise (a
        grid or random search, the GP's own random start-up) runs every trial of n_trials."""
        return self.settings.patience_trials if self._starts_from_design(plan) else None

    def _start_design(self, study: optuna.Study, plan: Plan, baseline: dict[str, Any], room: int) -> None:
        """The first proposals, each knob moved alone from the baseline; `room`: the trials n_trials leaves
        after the baseline's runs. The moves past it are kept on the study for its next sweep
        (search/sweep/start_design.py), unless other workers search the study already."""
        if not self._starts_from_design(plan):
            return
        design = one_knob_at_a_time(baseline, plan.space.distributions, plan.space.forbids, self.rng,
                                    plan.space.unused, plan.space.resolved)
        # Other workers searching already may run the moves past this one's n_trials: all are enqueued then.
        enqueue_start(study, design, None if workers.others_searching(study, self.settings.stale_after_s) else room)
        if design:
            nightly = bool(self.settings.nightly.get("enabled"))  # a night's next sweep is itself run again
            say(start_line(design, room, self.settings.n_trials, nightly, not_moved_alone(plan.space.distributions)))

    def _run_tags(self, plan: Plan) -> dict[str, str]:
        """What the sweep was, on its MLflow parent run: its objective and its fixed overrides (those every
        trial shares; a trial's own run has them with its knobs in search.overrides)."""
        return {"search.objective": self.jobs.default_study_name(),
                "search.fixed_overrides": paste_line(configuration_overrides(plan.space.fixed_overrides))}

    def _run_params(self, plan: Plan, metric_names: list[str]) -> dict[str, Any]:
        """The sweep's MLflow parent run params."""
        s = self.settings
        return {"n_trials": s.n_trials, "n_jobs": s.n_jobs, "directions": ",".join(plan.directions),
                "slots": len(plan.slots) if plan.slots else "none (launcher batches)",
                "metrics": ",".join(metric_names),
                "sampler": type(plan.sampler).__name__, "sampler_seed": "none" if s.seed is None else s.seed,
                "constraints": "; ".join(map(str, plan.constraints)) or "none",
                "early_stopping": plan.early_stopping, "pruner": type(plan.pruner).__name__,
                "early_stopping_margin": s.early_stopping_margin,
                "early_stopping_startup_trials": s.early_stopping_startup_trials,
                "accuracy_tolerance": s.accuracy_tolerance, "baseline_repeats": s.baseline_repeats,
                "confirm_budget": s.confirm_budget, "confirm_candidates": s.confirm_candidates,
                "confirm_undecided_rounds": s.confirm_undecided_rounds, "staging": s.staging,
                "report": s.report,
                "search_for": s.search_for,
                "start_design": "one_knob_at_a_time" if self._starts_from_design(plan) else "sampler",  # as run
                "start_combination": s.start_combination,
                "patience_trials": "none" if (p := self._patience_trials(plan)) is None else p,  # as run
                **{f"space.{k}": repr(d) for k, d in plan.space.distributions.items()}}

    def _report(self, study: optuna.Study, plan: Plan, sweep: tracking.Sweep, metric_names: list[str],
                outcomes: list[str], answer: Answer | None = None, last: bool = True) -> optuna.Study:
        """The front, the plots, the hooks' end, the answer; exit non-zero when the sweep gave up or a hook says so."""
        # No module more imported ahead: warnings.catch_warnings is not thread-safe, and an import beside the
        # report's plots can undo their filters (a loaded sweep of the code before printed Optuna's
        # ExperimentalWarnings there); the report imports what it still needs itself.
        self._imported_enough.set()
        print_front(study, metric_names, plan.space.unused or no_idle)
        report_dir = self.sweep_dir / "report"
        if self.settings.report and not last:  # another worker still searches: its report holds the whole study
            plot_files = []
            print("report: left to the last worker searching this study (its <sweep dir>/report and MLflow sweep "
                  "run get the plots of every trial)", flush=True)
        elif self.settings.report:
            plot_files = write_report(study, report_dir, sweep.parent_run_id)
        else:
            plot_files = []
            command = ["python", "-m", "search", "report", "--storage", storage_location(self.settings.storage),
                       "--study-name", study.study_name, "--out", str(report_dir)]
            print(f"report: no plots (hydra.sweeper.report=false); {shlex.join(command)} writes them", flush=True)
        hook_status = self.hooks.finish(metric_names, report_dir, sweep.parent_run_id, plot_files,
                                        last=last)
        print(f"MLflow: {mlflow_client.how_to_look()}   (experiment {self.settings.experiment_name or plan.study_name!r}:"
              f" {mlflow_client.experiment_url(sweep.experiment_id)})", flush=True)
        trials = study.get_trials(deepcopy=False)
        answer_runs = [trials[n].user_attrs.get(MLFLOW_RUN_ID_ATTR) for n in (answer.trials[:1] if answer else [])]
        runs = list(dict.fromkeys([r for r in answer_runs if r] + compare_run_ids(study)))
        if (url := mlflow_client.compare_url(runs)) is not None:
            named = set(answer_runs) | {t.user_attrs.get(MLFLOW_RUN_ID_ATTR) for t in baseline_trials(study)}
            front_adds = any(t.user_attrs.get(MLFLOW_RUN_ID_ATTR) not in named for t in front_trials(study))
            label = compare_label(bool(answer_runs), answer is not None and answer.is_baseline,
                                  bool(baseline_trials(study)), front_adds)
            print(f"MLflow, side by side ({label}): {url}", flush=True)
        if answer is not None and self.baseline is not None:
            print_answer(answer, self.baseline[0], plan.space.unused or no_idle)
        if self.failure_policy.gives_up(outcomes):
            print(f"search: gave up: {self.failure_policy.describe(outcomes)}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_GAVE_UP)
        if hook_status:
            raise SystemExit(hook_status)
        return study

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
            self._importing = _import_ahead(self._sampler_imports, self.settings.report, self._imported_enough)


def _import_ahead(modules: tuple[str, ...], plots: bool, enough: threading.Event) -> threading.Thread:
    """Import `modules`, then the report's plotting modules when `plots`, on one background thread, one module
    after another while a core sits spare (search/measure/spare_cpu.py) and until `enough` is set (the sweep
    ended); the first time no core is spare it imports nothing more, and the sweep imports the rest when it
    needs them. One import after another, since two threads importing scipy at once may deadlock on its module
    locks.

    Only onto a spare core: a thread sharing the first trial's core on a loaded machine slowed that trial
    (your configuration's first run, 0.87x and 0.92x its second beside 3 busy processes), and the same thread
    at the lowest priority (nice 19) instead was starved while it held the lock of the module it was
    importing: the sweep's main thread, needing that module next (torch and scipy at the GP's first ask, the
    report's plots), waited for it. Beside 3 busy processes on 2 cores the main thread waited 231 s for torch
    and 123 s for scipy, against 3.2 s to import both itself. Here a module starts only with a core idle, at
    the thread's normal priority: a load that arrives meanwhile shares a core with it for that module alone.

    Not a daemon: before Python 3.14 a daemon thread that asks for the GIL after the interpreter began
    finalising is ended with pthread_exit, whose forced unwinding through a C++ frame that may not throw (an
    extension module's init calling back into Python) is std::terminate: a one-trial sweep of a fast objective
    died of SIGABRT ("terminate called without an active exception") in the suite, likely so. Left to Python's
    exit to wait for, it still imported after threading's shutdown had begun, where an import that registers a
    threading exit hook (sklearn, through joblib, imports concurrent.futures.process) raises "can't register
    atexit after shutdown". `python -m search` ends without waiting for it (search/leave.py); a user's own
    Hydra app joins it, at most the module in progress."""
    spare = True  # False from the first time no core was spare: the thread imports nothing more

    def go_on() -> bool:
        nonlocal spare
        spare = spare and not enough.is_set() and spare_cores(SPARE_SAMPLE_S) >= SPARE_CORES
        return spare

    def run() -> None:
        for module in modules:
            if not go_on():
                return
            try:
                importlib.import_module(module)
            except ImportError:  # the sampler says so itself when it needs it
                pass
        if plots:
            preload_plots(go_on)

    thread = threading.Thread(target=run, name=IMPORT_AHEAD_THREAD, daemon=False)
    thread.start()
    return thread

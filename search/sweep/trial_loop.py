"""Running the trials: ask the search's engine for a trial (search/sweep/engine.py),
launch it as a Hydra job, close it with its result (search/sweep/closing.py),
until n_trials ran, the engine says the search is over, the failure policy
gives up or the hooks' wall time passed.

Under Hydra's basic launcher every device slot takes the next trial as soon
as its last one ends (search/trial/slots.py); other launchers get batches
of `n_jobs`.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import optuna
from hydra.core.utils import JobStatus
from optuna.trial import TrialState

from search.record import (ENDED_ATTR, EXTRA_OVERRIDES_ATTR, LAUNCHED_ATTR, MLFLOW_PARENT_RUN_ID_ATTR,
                           MLFLOW_RUN_ID_ATTR, OVERRIDES_ATTR, SLOTS_ATTR)
from search.reports.progress import SweepProgress
from search.sweep import interrupt, workers
from search.sweep.closing import abort_trial, close_trial, run_name
from search.sweep.engine import Engine
from search.sweep.failure_policy import FailurePolicy
from search.sweep.hooks import SweepHooks
from search.sweep.jobs import Jobs, result_of, trial_config
from search.sweep.planning import Plan
from search.sweep.recovery import Heartbeat, close_stale, stale_trials
from search.sweep.reproduce import REPRODUCE_TAG, configuration_overrides, paste_line
from search.sweep.roles import measured_whatever_the_time
from search.sweep.space import to_override
from search.sweep.sweep_settings import SweepSettings
from search.tracking import mlflow_client
from search.tracking import mlflow_runs as tracking
from search.trial import slots
from search.trial.composed_job import handing
from search.trial.typed_config import parse_trial


@dataclass
class SweepRun:
    """What every step of a running sweep needs."""

    settings: SweepSettings
    jobs: Jobs
    plan: Plan
    study: optuna.Study
    sweep: tracking.Sweep
    progress: SweepProgress
    heartbeat: Heartbeat
    rng: random.Random
    failure_policy: FailurePolicy
    wait_for_forkserver: Callable[[], None] = lambda: None
    trial_running: Callable[[], None] = lambda: None  # called after each launch (the sweeper's imports ahead)
    outcomes: list[str] = field(default_factory=list)
    engine: Engine | None = None  # the search's decisions (search/sweep/build.py); set once the study is open
    staging: bool = False  # throughput-only trials where the maths trained already (search/sweep/staging.py)
    started_s: float = field(default_factory=time.monotonic)
    said: set[str] = field(default_factory=set)  # lines each trial repeats, said once (search/sweep/closing.py)
    search_ended: str = ""  # why the search proposed no more trials, with how to search on (the answer's panel)


def run_trials(run: SweepRun, hooks: SweepHooks, target: int) -> None:
    """Trials until `target` ran, or the grid, the failure policy or the time (hooks.max_wall_s) says stop."""
    max_wall_s = hooks.max_wall_s()
    deadline = time.monotonic() + max_wall_s if max_wall_s else None
    while True:
        if len(run.outcomes) >= target:
            run.search_ended = search_on(run, f"it ran hydra.sweeper.n_trials={run.settings.n_trials}")
            break
        if out_of_time(run.study, deadline):
            run.search_ended = search_on(run, f"the hooks' wall time ({max_wall_s:.0f} s) passed")
            break
        if (why := run.engine.over()) is not None:
            run.progress.console.print(f"{why}: stopping after {len(run.outcomes)} new trials", markup=False)
            run.search_ended = search_on(run, why)
            break
        if run.plan.slots is not None:
            _run_slots(run, target - len(run.outcomes), deadline)
        else:
            _run_batch(run, min(run.settings.n_jobs, target - len(run.outcomes)))
        if run.failure_policy.gives_up(run.outcomes):
            break


def search_on(run: SweepRun, why: str) -> str:
    """Why the search stopped, and how to search on from there (a line of the answer's panel)."""
    if why.startswith("every"):
        return f"the search stopped: {why}; to search on, widen the space (hydra.sweeper.params)"
    if why.startswith("the sampler's"):  # the search's patience (search/sweep/patience.py)
        return (f"the search stopped: {why}; to search on, run the same command again with "
                f"hydra.sweeper.patience_trials=null (the study resumes)")
    left = run.engine.moves_left() if run.engine is not None and run.engine.floor() is not None else []
    more = f"; {len(left)} one-knob move(s) from the answer so far not measured yet" if left else ""
    return f"the search stopped: {why}{more}; to search on, run the same command again (the study resumes)"


def out_of_time(study: optuna.Study, deadline: float | None) -> bool:
    """Past the deadline (hooks.max_wall_s) with nothing waiting that runs whatever the time
    (search/sweep/roles.py measured_whatever_the_time)."""
    if deadline is None or time.monotonic() <= deadline:
        return False
    return not any(measured_whatever_the_time(t) for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


def recover(study: optuna.Study, settings: SweepSettings, retry: bool = True) -> None:
    """Close what a killed sweep left RUNNING (Optuna FAIL, MLflow KILLED) and, with `retry`, retry it (not in
    another study than this sweep's: an earlier night's, search/sweep/hooks.py earlier_studies)."""
    for trial in stale_trials(study, settings.stale_after_s):
        with interrupt.deferred():  # closed and enqueued again, or left for the next start: never half
            retried = close_stale(study, trial, settings.max_retries if retry else 0)
        if retried is None:  # another worker closed it
            continue
        run_id = trial.user_attrs.get(MLFLOW_RUN_ID_ATTR)
        parent_run_id = trial.user_attrs.get(MLFLOW_PARENT_RUN_ID_ATTR)
        try:
            if run_id is None and parent_run_id is not None:  # killed before its run was made, or before its id
                lines = trial.user_attrs.get(OVERRIDES_ATTR)
                run_id = tracking.run_of_killed_attempt(
                    parent_run_id, trial.number, trial.params, run_name(trial.number, trial.user_attrs),
                    {REPRODUCE_TAG: paste_line(configuration_overrides(lines))} if lines else {})
            mlflow_client.close_stale_runs(run_id, parent_run_id)
        except Exception as err:  # noqa: BLE001 - MLflow down mid-sweep: Optuna has closed it, the sweep goes on
            print(f"warning: MLflow: the run of trial {trial.number}, left running by a killed sweep, is not closed "
                  f"({type(err).__name__}); Optuna has closed the trial", flush=True)
        whose = "" if retry else f" of study {study.study_name!r}"
        print(f"trial {trial.number}{whose} was left running by a killed sweep: closed as failed"
              f"{', enqueued again' if retried else ''}", flush=True)


def propose(run: SweepRun, searching: bool = True) -> slots.Launch:
    """Ask for the next trial, compose and parse its config once, and open its MLflow run.
    Trials that a worker killed meanwhile left running are closed first (another
    worker's, or a dead sweep's on this host), so their retries come next. `searching`: a trial of the search,
    not one enqueued on purpose (run_enqueued), which never makes room for the start design's moves."""
    recover(run.study, run.settings)
    plan, study, settings = run.plan, run.study, run.settings
    workers.wait_while_confirming(study, settings.stale_after_s, run.progress.console.print)
    asked = run.engine.ask(searching)
    for line in asked.said:
        run.progress.console.print(line, markup=False, highlight=False)
    trial = asked.trial
    lines = (plan.space.fixed_overrides + [to_override(k, trial.params[k]) for k in plan.space.distributions]
             + list(trial.user_attrs.get(EXTRA_OVERRIDES_ATTR, [])) + asked.instructions.overrides)
    run.heartbeat.track(trial)
    trial.set_user_attr(MLFLOW_PARENT_RUN_ID_ATTR, run.sweep.parent_run_id)
    trial.set_user_attr(OVERRIDES_ATTR, lines)
    job_config = run.jobs.compose(lines)
    cfg = trial_config(job_config)
    # Parsed here when this process runs the job (None: a user's app, a refused config, or another
    # launcher's job, which parses in its own process: search/trial/app.py).
    parsed = parse_trial(cfg) if run.jobs.run_here() else None
    run_id = tracking.start_trial(run.sweep, trial.number, tracking.flatten(cfg),
                                  run_name(trial.number, trial.user_attrs),
                                  {REPRODUCE_TAG: paste_line(configuration_overrides(lines))})
    if run_id is not None:
        trial.set_user_attr(MLFLOW_RUN_ID_ATTR, run_id)
    devices = parsed.parallel.devices if parsed is not None else 1
    return slots.Launch(trial, lines, devices, job_config, parsed)


def run_enqueued(run: SweepRun, count: int) -> None:
    """The next `count` trials, enqueued on purpose (the confirmation's rounds and checks, nightly's top-ups), in
    the order they were enqueued, one at a time whatever the slots or `n_jobs`: the rounds compare your
    configuration with each contender run after run, and two of them sharing the machine would measure each
    other (seen with `hydra.sweeper.slots=2`: each round's pair started and ended together)."""
    for _ in range(count):
        if run.plan.slots is not None:
            _run_slots(run, 1, None, enqueued=True)
        else:
            _run_batch(run, 1, enqueued=True)


def _run_slots(run: SweepRun, budget: int, deadline: float | None, enqueued: bool = False) -> None:
    """Every device slot takes the next trial as soon as its last one ends, until `budget`
    trials ran, the grid is used up (unless they are `enqueued`) or the deadline passed."""

    def next_launch() -> slots.Launch | None:
        if (not enqueued and run.engine.over() is not None) or out_of_time(run.study, deadline):
            return None
        return propose(run, searching=not enqueued)

    def start(launch: slots.Launch, taken: list[slots.Slot]) -> Any:
        visible = slots.cuda_visible_devices(taken)
        launch.trial.set_user_attr(SLOTS_ATTR, ",".join(str(s.index) for s in taken))
        launch.trial.set_user_attr(LAUNCHED_ATTR, time.time())
        run.progress.started([launch.trial.number], launch.trial.params)
        with slots.detached_jobs(), handing(launch.config):
            if visible is None:  # the config composed when the trial was proposed is this job's config
                ret = run.jobs.run_composed(launch.job_config)
            else:
                ret = run.jobs.launch([launch.overrides + [f"trial.visible_devices='{visible}'"]])[0]
        run.trial_running()
        return ret.return_value if ret.status == JobStatus.COMPLETED else result_of(ret)

    def finish(launch: slots.Launch, result: Any) -> bool:
        launch.trial.set_user_attr(ENDED_ATTR, time.time())
        run.outcomes.append(close_trial(run, launch.trial, result))
        run.heartbeat.untrack(launch.trial)
        return run.failure_policy.gives_up(run.outcomes)

    def abort(launch: slots.Launch, err: BaseException) -> None:
        abort_trial(run, launch.trial, err)

    run.wait_for_forkserver()  # here, not in start(): slots.run defers signals there, and torch imports take seconds
    slots.run(run.plan.slots or [], budget, next_launch, start, finish, abort)


def _run_batch(run: SweepRun, batch: int, enqueued: bool = False) -> None:
    """Another launcher (joblib, submitit): a batch of trials, launched together, awaited together."""
    trials, overrides = [], []
    try:
        for _ in range(batch):
            with interrupt.deferred():  # a trial asked for is in `trials`, so a signal can close it
                launch = propose(run, searching=not enqueued)
                trials.append(launch.trial)
                overrides.append(launch.overrides)
        run.progress.started([t.number for t in trials], trials[0].params)
        returns = run.jobs.launch(overrides)
    except BaseException as err:
        for trial in trials:
            abort_trial(run, trial, err)
        raise
    with interrupt.deferred():  # every trial of the batch ended: each is told, none closed as interrupted
        for trial, ret in zip(trials, returns):
            run.outcomes.append(close_trial(run, trial, result_of(ret)))
            run.heartbeat.untrack(trial)

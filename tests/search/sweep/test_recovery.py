"""Nothing lost: SIGKILL of the sweep then the same command, SIGTERM, and no
orphan processes. Real sweeps in subprocesses; the trial processes are found
in the process table by an environment token only the test's sweep carries."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from conftest import NO_BASELINE, NO_REPORT, pythonpath, run_search
from sweep_results import load_study, runs, tagged_processes, wait_gone

pytestmark = pytest.mark.slow

# Every trial must complete and train in full here; early stopping and staging have their own tests.
ARGS = ["hydra.sweeper.n_trials=2", "train.budget_samples=3000", "batch_size=choice(32,64)",
        "loader.num_workers=1", "parallel.devices=1", "hydra.sweeper.seed=3",
        "hydra.sweeper.early_stopping=false", "hydra.sweeper.staging=false"]


def start_sweep(workdir: Path, token: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": pythonpath(), "SEARCH_TEST_TOKEN": token}
    return subprocess.Popen([sys.executable, "-m", "search", "multirun", NO_BASELINE, NO_REPORT, *args], cwd=workdir, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_until_a_trial_runs(workdir: Path, proc: subprocess.Popen, completed_before: int, timeout_s: float = 120):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if (workdir / "optuna.journal").exists():
            try:
                trials = load_study(workdir).trials
            except KeyError:  # the study is not written yet
                trials = []
            done = [t for t in trials if t.state == TrialState.COMPLETE]
            running = [t for t in trials if t.state == TrialState.RUNNING and "mlflow_run_id" in t.user_attrs]
            if len(done) >= completed_before and running:
                time.sleep(1.0)  # let the trial's process tree start
                return running[0]
        time.sleep(0.2)
    raise AssertionError("no trial started running in time")


def test_sigkill_mid_trial_then_the_same_command_resumes_without_loss_or_duplicates(workdir: Path) -> None:
    token = uuid.uuid4().hex
    proc = start_sweep(workdir, token, *ARGS)
    killed = wait_until_a_trial_runs(workdir, proc, completed_before=1)
    assert len(tagged_processes(token)) >= 3  # sweep, forkserver, trial (+ loader worker)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert wait_gone(token) == [], "a killed sweep left trial processes behind"

    again = run_search("multirun", *ARGS, cwd=workdir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"trial {killed.number} was left running by a killed sweep: closed as failed, enqueued again" in again.stdout

    everything = load_study(workdir).trials
    assert sorted(t.number for t in everything) == list(range(len(everything)))
    # The same seed replays the same first proposals on resume: repeats are skipped, not run.
    trials = [t for t in everything if t.user_attrs.get("outcome") != "skipped"]
    by_number = {t.number: t for t in trials}
    assert by_number[killed.number].state == TrialState.FAIL
    assert by_number[killed.number].user_attrs["outcome"] == "crashed"
    retry = [t for t in trials if t.user_attrs.get("search.retry_of") == killed.number]
    assert len(retry) == 1 and retry[0].params == killed.params and retry[0].state == TrialState.COMPLETE
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 3  # one before the kill, the retry and one new trial: n_trials=2 per invocation
    assert len(trials) == 4

    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    assert client.get_run(killed.user_attrs["mlflow_run_id"]).info.status == "KILLED"
    assert client.get_run(killed.user_attrs["mlflow_parent_run_id"]).info.status == "KILLED"
    all_runs = runs(workdir, "trial") + runs(workdir, "sweep")
    assert [r for r in all_runs if r.info.status == "RUNNING"] == []
    assert sorted(int(r.data.tags["search.trial_number"]) for r in runs(workdir, "trial")) == sorted(by_number)


@pytest.mark.parametrize("signum, status, said", [(signal.SIGTERM, 143, "terminated by SIGTERM"),
                                                  (signal.SIGINT, 130, "interrupted by SIGINT (Ctrl-C)")])
def test_sigterm_or_one_ctrl_c_closes_the_running_trial_enqueues_it_again_and_leaves_no_processes(
        workdir: Path, signum: signal.Signals, status: int, said: str) -> None:
    token = uuid.uuid4().hex
    proc = start_sweep(workdir, token, *ARGS)
    running = wait_until_a_trial_runs(workdir, proc, completed_before=0)
    started = time.monotonic()
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - started < 30
    assert proc.returncode == status, stderr[-3000:]
    assert said in stderr and "resume" in stderr
    assert wait_gone(token) == []

    trials = load_study(workdir).trials
    trial = trials[running.number]
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["reason"] == f"sweep {said}"
    assert f"trial {running.number}: enqueued again" in stdout  # preempted or interrupted: it measured nothing
    assert [t.system_attrs["fixed_params"] for t in trials if t.state == TrialState.WAITING] == [running.params]
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    assert client.get_run(trial.user_attrs["mlflow_run_id"]).info.status == "FAILED"
    assert client.get_run(trial.user_attrs["mlflow_parent_run_id"]).info.status == "KILLED"


def test_two_workers_closing_the_same_stale_trial_retry_it_once() -> None:
    """Every live worker sees a dead worker's trial as stale at the same time;
    the one whose FAIL lands retries it, the other steps aside without an error."""
    import optuna
    from search.record import WORKER_ATTR
    from search.sweep.recovery import close_stale, stale_trials

    study = optuna.create_study(directions=["maximize", "maximize"])
    trial = study.ask({"batch_size": optuna.distributions.CategoricalDistribution([32, 64])})
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    trial.set_user_attr(WORKER_ATTR, f"{socket.gethostname()}:{int(gone.stdout)}:{time.time():.2f}")  # exited
    seen_by_first, seen_by_second = stale_trials(study, 60.0), stale_trials(study, 60.0)
    assert [t.number for t in seen_by_first] == [t.number for t in seen_by_second] == [trial.number]

    assert close_stale(study, seen_by_first[0], max_retries=1) is True
    assert close_stale(study, seen_by_second[0], max_retries=1) is None
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert states == [TrialState.FAIL, TrialState.WAITING]  # failed once, enqueued once
    assert study.trials[0].user_attrs["outcome"] == "crashed"


def test_a_worker_is_known_by_when_it_started_since_boot_not_by_the_wall_clock() -> None:
    """psutil's create_time() adds the boot time, which Linux derives from the wall clock: a worker id made
    from it stops matching its own live process when the clock is stepped, and its trial was closed under it."""
    import psutil

    from search.sweep.recovery import worker_alive, worker_id

    me = worker_id()
    host, pid, started = me.rsplit(":", 2)
    assert host == socket.gethostname() and int(pid) == os.getpid()
    if sys.platform.startswith("linux"):
        assert started.startswith("t") and worker_id() == me  # ticks since boot: the same whatever the clock
    assert worker_alive(me) is True
    old = f"{host}:{os.getpid()}:{psutil.Process().create_time() + 1.0:.2f}"  # written before, clock moved 1 s
    assert worker_alive(old) is True
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert worker_alive(f"{host}:{int(gone.stdout)}:{started}") is False
    assert worker_alive(f"elsewhere:{pid}:{started}") is None  # another host: only its heartbeat tells


def test_a_retried_baseline_run_is_the_same_run_again_and_the_missing_seed_is_what_gets_enqueued() -> None:
    """A sweep killed in your configuration's first run: its retry came back as a plain trial at the study's seed
    (role and seed dropped), and the next sweep enqueued another run at seed + 1 by counting runs, so the study
    judged accuracy by the seed + 1 runs alone and your own configuration failed your own bar."""
    import optuna

    from search.record import EXTRA_OVERRIDES_ATTR, RETRY_OF_ATTR, ROLE_ATTR, SEED_ATTR
    from search.sweep.baseline import baseline_trials, enqueue_baseline
    from search.sweep.recovery import retry

    study = optuna.create_study(directions=["maximize", "maximize"])
    params = {"batch_size": 64}
    assert enqueue_baseline(study, params, repeats=2, seed=0) == 2
    first, second = (study.ask() for _ in range(2))  # both running when the sweep is killed
    for t in (first, second):
        study.tell(t, state=TrialState.FAIL)
        assert retry(study, study.trials[t.number], max_retries=1)
    again = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert [(t.user_attrs[ROLE_ATTR], t.user_attrs.get(SEED_ATTR), t.user_attrs[RETRY_OF_ATTR]) for t in again] == [
        ("baseline", None, 0), ("baseline", 1, 1)]
    assert again[1].user_attrs[EXTRA_OVERRIDES_ATTR] == ["train.seed=1"]
    assert enqueue_baseline(study, params, repeats=2, seed=0) == 0  # both retries are the runs it needs

    lone = optuna.create_study(directions=["maximize", "maximize"])  # only the seed + 1 run survived
    enqueue_baseline(lone, params, repeats=2, seed=0)
    study_seed_run = lone.ask()
    lone.tell(study_seed_run, state=TrialState.FAIL)  # killed, no retries left
    assert enqueue_baseline(lone, params, repeats=2, seed=0) == 1
    kept = [t for t in baseline_trials(lone) if t.state != TrialState.FAIL]
    assert sorted(str(t.user_attrs.get(SEED_ATTR)) for t in kept) == ["1", "None"]


def test_a_stopped_confirmation_run_is_not_retried_the_next_sweep_confirms_again() -> None:
    # was: "enqueued again ... the next sweep runs it first", and the next sweep dropped it unrun
    import optuna

    from search.record import ROLE_ATTR
    from search.sweep.recovery import retry

    study = optuna.create_study()
    for role, retried in (("confirm", False), ("seed_check", False), ("baseline", True)):
        trial = study.ask()
        trial.set_user_attr(ROLE_ATTR, role)
        assert retry(study, trial, max_retries=1) is retried
    [waiting] = study.get_trials(states=(TrialState.WAITING,))
    assert waiting.user_attrs[ROLE_ATTR] == "baseline"


@pytest.mark.parametrize("run_made", [False, True], ids=["before its run was made", "before it noted its run"])
def test_a_trial_killed_before_its_run_was_noted_has_a_killed_run_after_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_made: bool) -> None:
    """A SIGKILL between a trial's ask and its MLflow run (or between the run and the trial noting its id) left
    that attempt without a run in MLflow, or with one RUNNING for good; the next start's recovery closes it."""
    import optuna
    from optuna.distributions import CategoricalDistribution

    from search.record import OVERRIDES_ATTR, WORKER_ATTR
    from search.sweep.sweep_settings import SweepSettings
    from search.sweep.trial_loop import recover
    from search.tracking import mlflow_runs as tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    sweep = tracking.start_sweep("digits", "digits", {"n_trials": 2}, {},
                                 study_identity={"search.storage": "here", "search.study_id": "abc123"})
    study = optuna.create_study(study_name="digits", directions=["maximize", "maximize"])
    trial = study.ask({"batch_size": CategoricalDistribution([32, 64])})
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    trial.set_user_attr(WORKER_ATTR, f"{socket.gethostname()}:{int(gone.stdout)}:{time.time():.2f}")  # exited
    trial.set_user_attr("mlflow_parent_run_id", sweep.parent_run_id)
    trial.set_user_attr(OVERRIDES_ATTR, [f"batch_size={trial.params['batch_size']}"])
    if run_made:
        made = tracking.start_trial(sweep, trial.number, {"batch_size": trial.params["batch_size"]})

    recover(study, SweepSettings(stale_after_s=60.0, max_retries=1))

    client = MlflowClient()
    [run] = client.search_runs([sweep.experiment_id], "tags.`search.role` = 'trial'")
    if run_made:
        assert run.info.run_id == made  # the run it made, not a second one
    assert run.info.status == "KILLED" and run.data.tags["search.outcome"] == "crashed"
    assert run.data.tags["search.trial_number"] == str(trial.number)
    assert run.data.tags["search.study_id"] == "abc123"
    assert run.data.params["batch_size"] == str(trial.params["batch_size"])
    if not run_made:
        assert run.data.tags["search.overrides"].endswith(f"batch_size={trial.params['batch_size']}")
    assert client.get_run(sweep.parent_run_id).info.status == "KILLED"
    assert study.trials[0].state == TrialState.FAIL and study.trials[1].state == TrialState.WAITING  # its retry

"""SIGINT and SIGTERM while a trial runs, however many and however fast: the
sweep exits with the first signal's status, leaves no trial RUNNING in
Optuna or MLflow and no process behind, names the signal in the trial's
reason, and the next start runs the interrupted configuration again (up to
max_retries). Real sweeps in subprocesses, real signals sent to the sweep
process; the trial hangs (tests/faulty_objective.py) until it is stopped.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from servers import MlflowServer
from sweep_results import load_study, wait_gone

from conftest import NO_BASELINE, NO_REPORT, REPO, TESTS, pythonpath

pytestmark = pytest.mark.slow

HANGING = ["objective=custom", "objective.callable=faulty_objective:objective", "hydra.sweeper.study_name=custom",
           "hydra.sweeper.params=null", "batch_size=choice(32,64,128)", "hydra.sweeper.n_trials=1",
           "hydra.sweeper.max_retries=1"]


def start(workdir: Path, token: str, fault: str, tracking_uri: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": pythonpath(REPO, TESTS), "SEARCH_TEST_TOKEN": token,
           "SEARCH_TEST_FAULT_KIND": fault,  # not +fault.kind: the next start resumes the study with another fault
           "COLUMNS": "200", **({"MLFLOW_TRACKING_URI": tracking_uri} if tracking_uri else {})}
    return subprocess.Popen([sys.executable, "-m", "search", "multirun", NO_BASELINE, NO_REPORT, *HANGING],
                            cwd=workdir, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def running_trial(workdir: Path, proc: subprocess.Popen, timeout_s: float = 300):
    """The trial the sweep is running, once its MLflow run exists and its process has started."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            trials = load_study(workdir, "custom").get_trials(states=(TrialState.RUNNING,))
        except (KeyError, FileNotFoundError):  # the study is not written yet
            trials = []
        launched = [t for t in trials if "search.launched_unix_s" in t.user_attrs]
        if launched:
            time.sleep(1.0)  # let the trial's process tree start
            return launched[0]
        time.sleep(0.2)
    raise AssertionError("no trial started running in time")


def interrupt(workdir: Path, fault: str, signals: list[signal.Signals], gap_s: float, tracking_uri: str | None = None):
    """Start a sweep, send `signals` `gap_s` apart while its trial runs; returns the trial, the
    process's exit status, its output and the seconds from the first signal to its exit."""
    token = uuid.uuid4().hex
    proc = start(workdir, token, fault, tracking_uri)
    trial = running_trial(workdir, proc)
    first = time.monotonic()
    for signum in signals:
        proc.send_signal(signum)
        time.sleep(gap_s)
    out, err = proc.communicate(timeout=240)
    took_s = time.monotonic() - first
    assert wait_gone(token) == [], "the interrupted sweep left processes behind"
    return trial, proc.returncode, out, err, took_s


def assert_closed(workdir: Path, number: int, signal_name: str, err: str, mlflow_uri: str) -> None:
    trials = load_study(workdir, "custom").trials
    assert [t.number for t in trials if t.state == TrialState.RUNNING] == []
    trial = trials[number]
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["outcome"] == "crashed"
    assert signal_name in trial.user_attrs["reason"] and trial.user_attrs["search.stopped_by"] == signal_name
    client = MlflowClient(mlflow_uri)
    assert client.get_run(trial.user_attrs["mlflow_run_id"]).info.status == "FAILED"
    assert client.get_run(trial.user_attrs["mlflow_parent_run_id"]).info.status == "KILLED"
    assert "MLflow was unreachable" not in err and "Traceback" not in err


def retries_of(workdir: Path, number: int) -> list:
    return [t for t in load_study(workdir, "custom").trials if t.user_attrs.get("search.retry_of") == number]


def test_signals_during_cleanup_never_cut_it_short_and_the_next_start_retries(workdir: Path) -> None:
    uri = f"sqlite:///{workdir}/mlflow.db"

    # Two Ctrl-C 0.2 s apart: closed, named, enqueued again.
    first, status, out, err, _ = interrupt(workdir, "hang", [signal.SIGINT, signal.SIGINT], 0.2)
    assert status == 130, err[-3000:]
    assert_closed(workdir, first.number, "SIGINT", err, uri)
    assert "interrupted by SIGINT (Ctrl-C)" in err  # "1 later signal(s) ignored" too, when it came before the exit
    assert f"trial {first.number}: enqueued again" in out
    [waiting] = retries_of(workdir, first.number)
    assert waiting.state == TrialState.WAITING and waiting.system_attrs["fixed_params"] == first.params

    # The next start runs that retry first; Ctrl-C then SIGTERM: the first decides; no retry left.
    retry, status, out, err, _ = interrupt(workdir, "hang", [signal.SIGINT, signal.SIGTERM], 0.2)
    assert retry.user_attrs["search.retry_of"] == first.number and retry.params == first.params
    assert status == 130, err[-3000:]
    assert_closed(workdir, retry.number, "SIGINT", err, uri)
    assert f"trial {retry.number}: not enqueued again: hydra.sweeper.max_retries=1" in out
    assert retries_of(workdir, retry.number) == []

    # A burst, SIGTERM first (a preemption): exit 143, enqueued again.
    third, status, out, err, _ = interrupt(
        workdir, "hang", [signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGINT, signal.SIGINT], 0.05)
    assert third.number not in (first.number, retry.number)
    assert status == 143, err[-3000:]
    assert_closed(workdir, third.number, "SIGTERM", err, uri)
    assert "terminated by SIGTERM" in err

    # The next start runs the preempted configuration to the end.
    token = uuid.uuid4().hex
    proc = start(workdir, token, "none")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert wait_gone(token) == []
    [rerun] = retries_of(workdir, third.number)
    assert rerun.state == TrialState.COMPLETE and rerun.params == third.params
    assert [t for t in load_study(workdir, "custom").trials if t.state in (TrialState.RUNNING, TrialState.WAITING)] == []
    client = MlflowClient(uri)
    everything = client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=1000)
    assert [r.info.run_name for r in everything if r.info.status == "RUNNING"] == []


def test_ctrl_c_with_a_hung_mlflow_server_ends_within_the_bound(workdir: Path, tmp_path: Path) -> None:
    """A server that accepts connections and never answers (SIGSTOP): MLflow's own retries
    would take about 47 s per request, three requests in all; bounded, the cleanup closes the
    trial in Optuna, says truly that MLflow lacks its run, and exits within CLEANUP_BOUND_S."""
    from search.sweep.interrupt import CLEANUP_BOUND_S

    server = MlflowServer(f"sqlite:///{tmp_path / 'mlflow-server.db'}").start()
    try:
        token = uuid.uuid4().hex
        proc = start(workdir, token, "hang", server.uri)
        trial = running_trial(workdir, proc)
        os.killpg(server.proc.pid, signal.SIGSTOP)
        try:
            first = time.monotonic()
            proc.send_signal(signal.SIGINT)
            time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=240)
            took_s = time.monotonic() - first
        finally:
            os.killpg(server.proc.pid, signal.SIGCONT)
        assert proc.returncode == 130, err[-3000:]
        assert took_s < CLEANUP_BOUND_S + 15, f"the cleanup took {took_s:.0f} s"  # 15 s: slack for a loaded machine
        assert wait_gone(token) == []
        closed = load_study(workdir, "custom").trials[trial.number]
        assert closed.state == TrialState.FAIL and "SIGINT" in closed.user_attrs["reason"]
        assert "MLflow was unreachable: 1 trial runs are not in MLflow" in err  # true here
        assert [t.number for t in retries_of(workdir, trial.number)] != []
    finally:
        server.stop()


WATCHDOG = textwrap.dedent("""
    import os, signal, time
    from search.sweep import interrupt
    interrupt.install(bound_s=1.0)
    with interrupt.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)  # a storage that never answers
    print("not reached")
""")

DEFERRED = textwrap.dedent("""
    import os, signal, time
    from search.sweep import interrupt
    from search.errors import Interrupted
    interrupt.install(bound_s=30.0)
    try:
        with interrupt.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
            print("the section finished", flush=True)
    except Interrupted as err:
        print(f"raised at its end: {err}", flush=True)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):  # the cleanup goes on
            os.kill(os.getpid(), signum)
            time.sleep(0.1)
        print(f"cleanup done; ignored {[signal.Signals(s).name for s in interrupt.ignored()]}", flush=True)
        raise SystemExit(err.exit_status)
""")


def test_a_signal_inside_a_deferred_section_is_raised_at_its_end_and_later_ones_are_ignored() -> None:
    done = subprocess.run([sys.executable, "-c", DEFERRED], env={**os.environ, "PYTHONPATH": pythonpath()},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stdout.splitlines() == ["the section finished", "raised at its end: interrupted by SIGINT (Ctrl-C)",
                                        "cleanup done; ignored ['SIGINT', 'SIGTERM', 'SIGINT']"]


def test_a_cleanup_that_hangs_ends_at_the_bound_with_the_first_signals_status() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", WATCHDOG], env={**os.environ, "PYTHONPATH": pythonpath()},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 143, done.stderr
    assert time.monotonic() - started < 45  # 1 s bound; the rest is importing on a loaded machine
    assert "not reached" not in done.stdout
    assert "the cleanup after SIGTERM did not end within 1 s" in done.stderr

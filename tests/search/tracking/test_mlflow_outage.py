"""A real `mlflow server` on loopback stops in the middle of a sweep and comes
back: the sweep neither stalls nor loses anything, Optuna is unaffected, and
the runs it could not write are written once the server answers again."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from conftest import NO_BASELINE, NO_REPORT, pythonpath, run_search
from servers import MlflowServer, free_port
from sweep_results import load_study

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path):
    srv = MlflowServer(f"sqlite:///{tmp_path / 'mlflow-server.db'}")
    srv.start()
    yield srv
    srv.stop()


def complete(workdir: Path) -> list[optuna.trial.FrozenTrial]:
    try:
        return [t for t in load_study(workdir).trials if t.state == TrialState.COMPLETE]
    except (KeyError, FileNotFoundError):
        return []


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


BATCHES = [str(b) for b in range(16, 240, 16)]  # 14 configurations: a sweep stops once every one of them ran
# Early stopping off: a trial it stops is COMPLETE in Optuna and KILLED in MLflow by design, and under a
# neighbour's load it stopped one of these trials now and then; these tests are about MLflow going away.
NO_EARLY_STOPPING = "hydra.sweeper.early_stopping=false"


def test_mlflow_down_mid_sweep_then_back(workdir: Path, server: MlflowServer) -> None:
    env = {**os.environ, "PYTHONPATH": pythonpath(), "MLFLOW_TRACKING_URI": server.uri}
    sweep = subprocess.Popen(
        [sys.executable, "-m", "search", "multirun", NO_BASELINE, NO_REPORT, NO_EARLY_STOPPING, "hydra.sweeper.n_trials=14", "hydra.sweeper.params=null",
         f"batch_size=choice({','.join(BATCHES)})", "train.budget_samples=1000", "parallel.devices=1",
         "loader.num_workers=0"],
        cwd=workdir, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    client = MlflowClient(server.uri)
    try:
        wait_for(lambda: len(complete(workdir)) >= 1, 120, "a first trial")
        server.stop()
        wait_for(lambda: len(complete(workdir)) >= 4, 120, "trials while MLflow is down")
        server.start()
        out, err = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 0, err[-3000:]
    assert "MLflow stopped answering" in out and "MLflow answers again" in out
    trials = [t for t in load_study(workdir).trials if t.user_attrs.get("outcome") != "skipped"]  # repeats
    assert len(trials) == 14 and all(t.state == TrialState.COMPLETE for t in trials)
    # A stall is the time a trial spent outside its own process: MLflow's default retries would take minutes
    # per call; the sweep's own work between ask and tell takes seconds, more under a neighbour's load.
    stalled = max((t.datetime_complete - t.datetime_start).total_seconds() - t.user_attrs["metrics"]["trial_wall_s"]
                  for t in trials)
    assert stalled < 45, f"a trial spent {stalled:.0f} s outside its training process: the sweep stalled on MLflow"
    experiment = client.get_experiment_by_name("digits")
    runs = client.search_runs([experiment.experiment_id], "tags.`search.role` = 'trial'", max_results=100)
    assert sorted(int(r.data.tags["search.trial_number"]) for r in runs) == sorted(t.number for t in trials)
    assert all(r.info.status == "FINISHED" for r in runs)
    assert all("throughput_samples_per_s" in r.data.metrics and r.data.params["batch_size"] in BATCHES for r in runs)
    [parent] = client.search_runs([experiment.experiment_id], "tags.`search.role` = 'sweep'")
    assert parent.info.status == "FINISHED"


UNUSABLE_TRACKING = {  # the first with the default study journal, the others with an SQLite study
    "unreachable server": lambda workdir: f"http://127.0.0.1:{free_port()}",
    "mlflow.db is a directory": lambda workdir: (workdir / "mlflow.db").mkdir() or f"sqlite:///{workdir}/mlflow.db",
    "mlflow.db is not a database": lambda workdir: (workdir / "mlflow.db").write_text("not sqlite\n") and
                                                   f"sqlite:///{workdir}/mlflow.db",
    "mlflow.db in a missing directory": lambda workdir: f"sqlite:///{workdir}/gone/mlflow.db",
}


@pytest.mark.parametrize("case", UNUSABLE_TRACKING, ids=list(UNUSABLE_TRACKING))
def test_unusable_tracking_uri_leaves_nothing_behind(workdir: Path, case: str) -> None:
    """Every dependency is checked before anything is created: opening the study storage would create
    the journal file (or the SQLite file), and the exit-2 run leaves not even an empty one."""
    (workdir / "mlflow.db").unlink()  # the workdir fixture's empty database: each case makes its own
    tracking = UNUSABLE_TRACKING[case](workdir)
    storage = [] if case == "unreachable server" else [f"hydra.sweeper.storage=sqlite:///{workdir}/study.db"]
    before = sorted(workdir.rglob("*"))
    result = run_search("multirun", *storage, cwd=workdir, timeout_s=180, env={"MLFLOW_TRACKING_URI": tracking})
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("search: error: ") and "MLflow" in line and "fix:" in line, line
    assert sorted(workdir.rglob("*")) == before


def test_an_outage_that_outlasts_the_sweep_is_repaired_by_the_next_start(workdir: Path, server: MlflowServer) -> None:
    """MLflow goes down after the first trial and stays down until the sweep has ended: its run and
    trial runs stay RUNNING and what MLflow lacks goes to mlflow-unlogged.json. Two workers then start
    at once against the server, back up: the file is written once, no run is made twice, none is
    left RUNNING."""
    env = {**os.environ, "PYTHONPATH": pythonpath(), "MLFLOW_TRACKING_URI": server.uri}
    command = [sys.executable, "-m", "search", "multirun", NO_BASELINE, NO_EARLY_STOPPING, "hydra.sweeper.params=null",
               "batch_size=choice(64,128)", "train.budget_samples=600", "parallel.devices=1", "loader.num_workers=0"]
    sweep = subprocess.Popen([*command, "hydra.sweeper.n_trials=4"], cwd=workdir, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: len(complete(workdir)) >= 1, 120, "a first trial")
        server.stop()
        out, err = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 0, err[-3000:]
    [unlogged] = list((workdir / "multirun").rglob("mlflow-unlogged.json"))
    first_sweep = [t.number for t in load_study(workdir).trials if t.user_attrs.get("outcome") != "skipped"]

    server.start()
    client = MlflowClient(server.uri)
    experiment = client.get_experiment_by_name("digits")
    assert client.search_runs([experiment.experiment_id], "attributes.status = 'RUNNING'"), "nothing left to repair"
    workers = [subprocess.Popen([*command, NO_REPORT, "hydra.sweeper.n_trials=1"], cwd=workdir, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    try:
        outputs = [w.communicate(timeout=400) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    assert [w.returncode for w in workers] == [0, 0], [e[-2000:] for _, e in outputs]
    repaired = [line for out, _ in outputs for line in out.splitlines() if "is closed as" in line]
    assert len(repaired) == 1 and "closed as FINISHED" in repaired[0], repaired
    assert not unlogged.exists() and unlogged.with_name("mlflow-unlogged.replayed.json").exists()

    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    assert [r.info.run_id for r in runs if r.info.status == "RUNNING"] == []
    trial_runs = [r for r in runs if r.data.tags.get("search.role") == "trial"]
    numbers = sorted(int(r.data.tags["search.trial_number"]) for r in trial_runs)
    ran = [t.number for t in load_study(workdir).trials if t.user_attrs.get("outcome") != "skipped"]  # repeats
    assert numbers == sorted(ran), "a trial's run is missing or made twice"
    by_number = {int(r.data.tags["search.trial_number"]): r for r in trial_runs}
    for number in first_sweep:
        run = by_number[number]
        assert run.info.status == "FINISHED" and "throughput_samples_per_s" in run.data.metrics, number
        assert run.data.params["batch_size"] in ("64", "128") and run.data.tags["search.outcome"] == "ok"
    parents = [r for r in runs if r.data.tags.get("search.role") == "sweep"]
    assert len(parents) == 3 and all(r.info.status == "FINISHED" for r in parents)


def test_two_workers_repairing_one_dead_sweep_at_once_write_each_run_once(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The repair itself, in two threads started together on a real MLflow store and a real study: one
    replays the dead sweep's file, the other waits for the lock, finds the sweep run closed and moves on."""
    import socket
    import threading

    from search.tracking import mlflow_repair
    from search.tracking import mlflow_runs as tracking
    from search.record import WORKER_ATTR

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    client = MlflowClient()
    study = optuna.create_study(study_name="digits", directions=["maximize"])
    sweep_dir = tmp_path / "multirun" / "old"
    sweep_dir.mkdir(parents=True)
    sweep = tracking.start_sweep("digits", "digits", {"n_trials": 6}, {}, sweep_dir=sweep_dir)
    client.set_tag(sweep.parent_run_id, WORKER_ATTR, f"{socket.gethostname()}:999999999:0.00")  # gone
    for number in range(6):
        trial = study.ask()
        study.tell(trial, [float(number)])
        record = tracking.TrialRecord(number, {"batch_size": 64}, ended=True, outcome="ok",
                                      metrics={"throughput_samples_per_s": 100.0 + number})
        sweep.pending[number] = record
    sweep.parent_status = "FINISHED"
    tracking.save_unlogged(sweep, sweep_dir / tracking.UNLOGGED_FILE)

    barrier, lines = threading.Barrier(2), []

    def worker() -> None:
        barrier.wait()
        lines.extend(mlflow_repair.repair("digits", study))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(lines) == 1 and "closed as FINISHED" in lines[0], lines
    runs = client.search_runs([sweep.experiment_id], "tags.`search.role` = 'trial'", max_results=100)
    assert sorted(int(r.data.tags["search.trial_number"]) for r in runs) == list(range(6))
    assert all(r.info.status == "FINISHED" and r.data.metrics["throughput_samples_per_s"] >= 100 for r in runs)
    assert client.get_run(sweep.parent_run_id).info.status == "FINISHED"
    assert mlflow_repair.repair("digits", study) == []  # nothing left: a third start changes nothing

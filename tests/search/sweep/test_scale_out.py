"""Workers on several machines, played on loopback: three `python -m search
multirun` processes started at once on one study in a real PostgreSQL and
one real `mlflow server` whose backend store is that PostgreSQL; one of them
is killed in the middle of a trial, the other two finish the sweep and
close its trial as failed. One sweep checks both, to keep the suite short."""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from conftest import NO_BASELINE, NO_REPORT, pythonpath
from servers import MlflowServer, Postgres, postgres_available

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not postgres_available(), reason="PostgreSQL 15 server binaries are not installed")]

ENQUEUED = [{"batch_size": 32}, {"batch_size": 128}]
# Every trial trains to the end: this test counts bookkeeping, and an early stop depends on timing under load.
SPACE = ["hydra.sweeper.params=null", "batch_size=choice(16,32,48,64,96,128)", "parallel.devices=1",
         "loader.num_workers=0", "hydra.sweeper.early_stopping=false"]


@pytest.fixture(scope="module")
def servers():
    """One PostgreSQL holding the studies and MLflow's tables, one mlflow server on it."""
    with Postgres.throwaway("search", "scale-out-pw") as pg:
        pg.create_database("study")
        pg.create_database("mlflow")
        mlflow = MlflowServer(pg.url("mlflow").replace("postgresql://", "postgresql+psycopg://", 1)).start()
        try:
            yield pg, mlflow
        finally:
            mlflow.stop()


def start_workers(servers, workdir: Path, study: str, count: int, *extra: str) -> list[subprocess.Popen]:
    pg, mlflow = servers
    env = {**os.environ, "PYTHONPATH": pythonpath(), "MLFLOW_TRACKING_URI": mlflow.uri}
    return [subprocess.Popen(  # output to files: a killed worker's trial processes keep pipes open a while
        [sys.executable, "-m", "search", "multirun", NO_BASELINE, NO_REPORT, f"hydra.sweeper.storage={pg.url('study')}",
         f"hydra.sweeper.study_name={study}", *SPACE, *extra, f"hydra.sweep.dir=multirun/{study}-{i}"],
        cwd=workdir, env=env, stdout=open(workdir / f"worker-{i}.log", "w"), stderr=subprocess.STDOUT)
        for i in range(count)]


def new_study(pg: Postgres, name: str) -> optuna.Study:
    return optuna.create_study(study_name=name, storage=pg.url("study"), directions=["maximize", "maximize"],
                               load_if_exists=True)


def trial_runs(mlflow: MlflowServer, experiment: str) -> tuple[list, list]:
    client = MlflowClient(mlflow.uri)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    runs = client.search_runs([experiment_id], max_results=1000)
    return ([r for r in runs if r.data.tags.get("search.role") == "trial"],
            [r for r in runs if r.data.tags.get("search.role") == "sweep"])


def _join_study(url: str, name: str, barrier, results) -> None:
    """One worker's start: open the storage and the study, at the same moment as the others."""
    from search.sweep.study import load_or_create, open_storage

    barrier.wait()
    try:
        storage = open_storage(url)
        study, _ = load_or_create(name, storage, ["maximize", "maximize"], optuna.samplers.RandomSampler())
        results.put(study._study_id)
    except BaseException as err:  # noqa: BLE001 (reported to the test)
        results.put(f"{type(err).__name__}: {' '.join(str(err).split())[:300]}")


def test_workers_started_together_on_a_new_database_all_join_one_study(servers) -> None:
    """Workers started at once on a new study in an empty database: one creates the tables and the study,
    the others use them. Under load, two of three workers once died here (CREATE TABLE raced: exit 2 with
    "must be reachable"; create_study raced: DuplicatedStudyError), and the study got 3 trials of 9."""
    pg, _ = servers
    workers = 6
    context = multiprocessing.get_context("fork")
    # On an empty database the workers race to create the tables, then the study; on the last one, whose
    # tables exist, only the study (before the fix: 5 of 6 workers failed there, every time).
    for database, study in [("fresh0", "new"), ("fresh1", "new"), ("fresh1", "second")]:
        if study == "new":
            pg.create_database(database)
        barrier, results = context.Barrier(workers), context.Queue()
        procs = [context.Process(target=_join_study, args=(pg.url(database), study, barrier, results))
                 for _ in range(workers)]
        for proc in procs:
            proc.start()
        outcomes = [results.get(timeout=120) for _ in procs]
        for proc in procs:
            proc.join(timeout=60)
        assert len(set(outcomes)) == 1 and isinstance(outcomes[0], int), outcomes  # one study, every worker in it


def test_three_workers_one_killed(servers, workdir: Path) -> None:
    """Three workers start at once; the first is SIGKILLed in the middle of a trial."""
    pg, mlflow = servers
    study = new_study(pg, "three")
    for params in ENQUEUED:
        study.enqueue_trial(params)
    per_worker = 3
    procs = start_workers(servers, workdir, "three", 3, f"hydra.sweeper.n_trials={per_worker}",
                          "train.budget_samples=1000")
    victim, survivors = procs[0], procs[1:]
    mark = f":{victim.pid}:"
    deadline = time.monotonic() + 300
    killed = None
    while killed is None and time.monotonic() < deadline:
        for trial in study.get_trials(states=(TrialState.RUNNING,)):
            if mark in trial.user_attrs.get("search.worker", "") and "search.launched_unix_s" in trial.user_attrs:
                victim.send_signal(signal.SIGKILL)  # its trial's process is training now
                killed = trial.number
        time.sleep(0.1)
    assert killed is not None, "the first worker never started a trial"
    victim.wait(timeout=60)
    for i, proc in enumerate(survivors, start=1):
        proc.wait(timeout=600)
        assert proc.returncode == 0, (workdir / f"worker-{i}.log").read_text()[-3000:]  # they finish, no crash
    assert victim.returncode == -signal.SIGKILL

    everything = {t.number: t for t in new_study(pg, "three").trials}
    assert sorted(everything) == list(range(len(everything)))  # trial numbers unique, none lost
    assert not [t for t in everything.values() if t.state == TrialState.RUNNING]
    ran = [t for t in everything.values() if t.user_attrs.get("outcome") != "skipped"]  # repeats: no_repeat.py
    by_survivors = [t for t in ran if mark not in t.user_attrs["search.worker"]]
    assert len(by_survivors) == 2 * per_worker  # the total equals the survivors' budget
    assert all(t.state == TrialState.COMPLETE for t in by_survivors), [t.user_attrs.get("reason") for t in ran]
    assert len({t.user_attrs["search.worker"] for t in by_survivors}) == 2

    dead = everything[killed]  # closed as failed by a survivor, its configuration run again once
    assert dead.state == TrialState.FAIL and dead.user_attrs["outcome"] == "crashed"
    assert "was killed" in dead.user_attrs["reason"]
    retries = [t for t in ran if t.user_attrs.get("search.retry_of") == killed]
    assert [(t.state, t.params) for t in retries] == [(TrialState.COMPLETE, dead.params)]

    originals = [t for t in ran if "fixed_params" in t.system_attrs
                 and not {"search.replaces", "search.retry_of"} & set(t.user_attrs)]
    assert sorted(t.params["batch_size"] for t in originals) == [32, 128]  # each enqueued trial taken once
    assert all(t.state == TrialState.COMPLETE or t.number == killed for t in originals)

    runs, parents = trial_runs(mlflow, "three")  # every trial of every worker logged once, none lost
    assert sorted(int(r.data.tags["search.trial_number"]) for r in runs) == sorted(t.number for t in ran)
    assert {t.user_attrs["mlflow_run_id"] for t in ran} == {r.info.run_id for r in runs}
    status = {int(r.data.tags["search.trial_number"]): r.info.status for r in runs}
    assert status.pop(killed) == "KILLED" and set(status.values()) == {"FINISHED"}
    assert sorted(p.info.status for p in parents) == ["FINISHED", "FINISHED", "KILLED"]  # one parent run per worker
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {p.info.run_id for p in parents}

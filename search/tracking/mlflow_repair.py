"""The next start repairs what an MLflow outage that outlasted its sweep left.

A sweep that ends while MLflow is down leaves its own run, and the runs of
trials that ended during the outage, RUNNING, and writes what MLflow lacks
to `<sweep dir>/mlflow-unlogged.json` (search/tracking/mlflow_runs.py). The operator
runs the same command again; before its sweep starts, against an MLflow that
answers (checked at start-up), this finds the study's sweep runs still
RUNNING whose worker is gone from this host, writes what their file holds,
closes every trial run they left RUNNING with its outcome from the Optuna
study, and closes the sweep run with the status it ended with. So "no run is
left RUNNING after the next start" holds for MLflow as it does for Optuna.

Never a run twice: the repair of one old sweep holds an exclusive lock on
its directory and reads the run's status again under it (a worker started
at the same moment finds the run closed and moves on); a trial's run is
looked up by its tags before one is made (a replay that another outage cut
short resumes without a second run); the file is rewritten after each trial
and renamed `mlflow-unlogged.replayed.json` at the end. A sweep whose
worker ran on another host is left to that host's next start, which can
read its file and tell whether it is still running.
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import optuna
from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from search.record import CRASHED, METRICS_ATTR, OUTCOME_ATTR, WORKER_ATTR, reason
from search.tracking import mlflow_runs as tracking
from search.tracking.mlflow_client import log_values
from search.sweep.recovery import worker_alive
from search.sweep.staging import logged_metrics
from search.tracking.redact import redact

REPLAYED_SUFFIX = ".replayed.json"


def repair(experiment_name: str, *studies: optuna.Study) -> list[str]:
    """Repair the studies' dead sweeps in MLflow (one query for them all: nightly passes every earlier night);
    one line per sweep repaired (or left half done)."""
    by_name = {study.study_name: study for study in studies}
    client = MlflowClient()
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None or not by_name:
        return []
    lines = []
    for parent in client.search_runs([experiment.experiment_id], "tags.`search.role` = 'sweep' and "
                                     "attributes.status = 'RUNNING'", max_results=1000):
        worker = parent.data.tags.get(WORKER_ATTR)
        study = by_name.get(parent.data.tags.get("search.study_name", ""))
        if study is None or not worker:
            continue
        if worker_alive(worker) is not False:
            continue  # a live sweep, or one on another host
        path = Path(parent.data.tags[tracking.UNLOGGED_TAG]) if tracking.UNLOGGED_TAG in parent.data.tags else None
        with _claim(path.parent if path else None):
            if client.get_run(parent.info.run_id).info.status != "RUNNING":
                continue  # another worker repaired it while this one waited for the lock
            try:
                lines.append(_repair_sweep(client, experiment.experiment_id, parent, path, study))
            except Exception as err:  # MLflow stopped answering again: the next start goes on from here
                reason = redact(" ".join(str(err).split())[:160])
                lines.append(f"MLflow: repairing sweep run {parent.info.run_id} stopped ({type(err).__name__}: "
                             f"{reason}); the next start goes on from where it stopped")
    return lines


@contextmanager
def _claim(directory: Path | None) -> Iterator[None]:
    """An exclusive lock on the old sweep's directory (a directory, so nothing is created for it)."""
    if directory is None or not directory.is_dir():
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _repair_sweep(client: MlflowClient, experiment_id: str, parent: Run, path: Path | None,
                  study: optuna.Study) -> str:
    parent_id = parent.info.run_id
    outage = path is not None and path.exists()  # its sweep ended while MLflow was down, and wrote what it lacks
    if outage:
        sweep = tracking.load_unlogged(client, path)
    else:  # killed before it could write one: what MLflow lacks is only in Optuna
        sweep = tracking.Sweep(client, experiment_id, parent_id, study.study_name, parent_status="KILLED")
    trial_runs = {int(r.data.tags["search.trial_number"]): r for r in client.search_runs(
        [experiment_id], f"tags.`{MLFLOW_PARENT_RUN_ID}` = '{parent_id}'", max_results=10000)
        if "search.trial_number" in r.data.tags}
    replayed = 0
    for number in sorted(sweep.pending):
        record = sweep.pending[number]
        if record.run_id is None and number in trial_runs:
            record.run_id = trial_runs[number].info.run_id  # made by a replay cut short: not made twice
        if record.ended:
            tracking.write_record(sweep, record)
            replayed += 1
        del sweep.pending[number]
        if path is not None and path.exists():
            tracking.save_unlogged(sweep, path)
    closed = 0
    for number, run in trial_runs.items():
        if client.get_run(run.info.run_id).info.status == "RUNNING":
            _close_from_study(client, run.info.run_id, study, number)
            closed += 1
    tracking.close_parent(sweep)
    if path is not None and path.exists():
        path.rename(path.with_name(path.name.removesuffix(".json") + REPLAYED_SUFFIX))
    how = "when its sweep ended during an outage" if outage else "by a sweep that was killed"
    return (f"MLflow: sweep run {parent_id} (study {study.study_name!r}), left RUNNING {how}, is closed as "
            f"{sweep.parent_status}; {replayed} trial runs written from {path.name if path else 'no file'}, "
            f"{closed} more closed from the Optuna study")


def _close_from_study(client: MlflowClient, run_id: str, study: optuna.Study, number: int) -> None:
    """A trial run its sweep could not end: closed with the outcome and metrics the study holds."""
    trials = study.get_trials(deepcopy=False)
    trial = trials[number] if number < len(trials) and trials[number].number == number else None
    finished = trial is not None and trial.state.is_finished()
    outcome = str(trial.user_attrs.get(OUTCOME_ATTR, CRASHED)) if finished else CRASHED
    metrics = trial.user_attrs.get(METRICS_ATTR) if finished else None
    log_values(client, run_id, metrics=logged_metrics(metrics, trial.user_attrs) if isinstance(metrics, dict) else {},
               tags={"search.outcome": outcome, "search.reason": reason(trial)
                     if finished else "its sweep ended without closing it"})
    client.set_terminated(run_id, status=tracking.RUN_STATUS.get(outcome, "FAILED" if finished else "KILLED"))

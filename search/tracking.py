"""MLflow bookkeeping on MlflowClient: one parent run per sweep invocation,
one nested run per trial.

Written on the client directly (optuna-integration's MLflowCallback is
deprecated) so that a trial's run exists while it trains and is closed with
its outcome even when the trial fails. Every string that could hold a URL
goes through `redact` first.
"""
from __future__ import annotations

import math
import os
import time
import fcntl
import json
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from search.redact import redact

_MAX_PARAM_CHARS = 6000
_BATCH = 100
_RUN_STATUS = {"ok": "FINISHED", "stopped_early": "KILLED"}  # stopped on purpose by early stopping
RETRY_AFTER_S = 10.0  # after a failed write, wait this long before trying MLflow again


@dataclass
class TrialRecord:
    """Everything one trial's run must hold, kept until MLflow has all of it."""

    number: int
    params: dict[str, Any]
    run_id: str | None = None
    ended: bool = False
    outcome: str = "running"
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    series: dict[str, list] = field(default_factory=dict)


@dataclass
class Sweep:
    """The sweep's parent run and the trial records MLflow does not have yet.

    When the tracking server stops answering, the sweep goes on (Optuna is
    the source of truth); records wait here and are written, in order, at the
    next trial boundary after MLflow answers again. Whatever is still
    unwritten when the sweep ends is saved to a file and reported."""

    client: MlflowClient
    experiment_id: str
    parent_run_id: str
    study_name: str
    pending: dict[int, TrialRecord] = field(default_factory=dict)
    down_since: float | None = None
    parent_status: str | None = None


def configure_client() -> None:
    """MLflow's HTTP client retries for minutes by default; a sweep would stall
    on a down server. Bounded unless the user set these themselves."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    # MLflow prints each run's URL, userinfo included, when a run ends on an
    # http server; the sweep prints its own (redacted) pointer instead.
    os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"


def how_to_look() -> str:
    """The command (local store) or address (server) that shows the runs."""
    uri = redact(mlflow.get_tracking_uri())
    return f"open {uri}" if uri.startswith(("http://", "https://")) else f"mlflow ui --backend-store-uri {uri}"


def start_sweep(experiment_name: str, study_name: str, params: Mapping[str, Any], tags: Mapping[str, str]) -> Sweep:
    client = MlflowClient()
    experiment_id = _experiment_id(client, experiment_name)
    run = client.create_run(
        experiment_id,
        run_name=f"sweep-{time.strftime('%Y%m%d-%H%M%S')}",
        tags={"search.role": "sweep", "search.study_name": study_name, **{k: redact(str(v)) for k, v in tags.items()}},
    )
    sweep = Sweep(client, experiment_id, run.info.run_id, study_name)
    _log(sweep, run.info.run_id, params=params)
    return sweep


def _experiment_id(client: MlflowClient, name: str) -> str:
    """The experiment's id, made if missing; workers started together race to make it."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return client.create_experiment(name)
    except mlflow.exceptions.MlflowException:
        experiment = client.get_experiment_by_name(name)  # another worker made it first
        if experiment is None:
            raise
        return experiment.experiment_id


def start_trial(sweep: Sweep, trial_number: int, params: Mapping[str, Any]) -> str | None:
    """The trial's run id, or None while MLflow is unreachable (the run is made later)."""
    record = TrialRecord(trial_number, dict(params))
    sweep.pending[trial_number] = record
    flush(sweep)
    return record.run_id


def end_trial(sweep: Sweep, trial_number: int, outcome: str, metrics: Mapping[str, float],
              tags: Mapping[str, str], series: Mapping[str, list] | None = None) -> None:
    record = sweep.pending.get(trial_number)
    if record is None:  # interrupted before its run was even asked for
        record = sweep.pending[trial_number] = TrialRecord(trial_number, {})
    record.ended, record.outcome = True, outcome
    record.metrics, record.tags, record.series = dict(metrics), dict(tags), dict(series or {})
    flush(sweep)


def flush(sweep: Sweep) -> None:
    """Write what MLflow lacks, oldest trial first; stop at the first failure."""
    if sweep.down_since is not None and time.monotonic() - sweep.down_since < RETRY_AFTER_S:
        return
    for number in sorted(sweep.pending):
        record = sweep.pending[number]
        if not _attempt(sweep, lambda: _write(sweep, record)):
            return
        if record.ended:
            del sweep.pending[number]
    if sweep.parent_status is not None:
        _attempt(sweep, lambda: sweep.client.set_terminated(sweep.parent_run_id, status=sweep.parent_status))


def _write(sweep: Sweep, record: TrialRecord) -> None:
    if record.run_id is None:
        run = sweep.client.create_run(sweep.experiment_id, run_name=f"trial-{record.number}", tags={
            MLFLOW_PARENT_RUN_ID: sweep.parent_run_id,
            MLFLOW_RUN_NAME: f"trial-{record.number}",
            "search.role": "trial",
            "search.study_name": sweep.study_name,
            "search.trial_number": str(record.number),
            "search.outcome": "running",
        })
        record.run_id = run.info.run_id
        _log(sweep, record.run_id, params=record.params)
    if record.ended:
        _log_series(sweep, record.run_id, record.series)
        _log(sweep, record.run_id, metrics=record.metrics, tags={"search.outcome": record.outcome, **record.tags})
        sweep.client.set_terminated(record.run_id, status=_RUN_STATUS.get(record.outcome, "FAILED"))


def _attempt(sweep: Sweep, write: Callable[[], None]) -> bool:
    try:
        write()
    except Exception as err:  # connection refused, timeout, 5xx after MLflow's bounded retries
        if sweep.down_since is None:
            reason = redact(" ".join(str(err).split())[:160])
            print(f"warning: MLflow stopped answering ({type(err).__name__}: {reason}); the sweep goes on, "
                  f"Optuna keeps every result, and the runs are written when MLflow answers again", flush=True)
        sweep.down_since = time.monotonic()
        return False
    if sweep.down_since is not None:
        print("MLflow answers again: writing the runs it missed", flush=True)
    sweep.down_since = None
    return True


def end_sweep(sweep: Sweep, status: str, metrics: Mapping[str, float] | None = None,
              unlogged_path: Path | None = None) -> None:
    sweep.parent_status = status
    _attempt(sweep, lambda: _log(sweep, sweep.parent_run_id, metrics=metrics or {}))
    sweep.down_since = None  # one last try, whatever the back-off says
    flush(sweep)
    if sweep.pending and unlogged_path is not None:
        unlogged_path.parent.mkdir(parents=True, exist_ok=True)
        unlogged_path.write_text(json.dumps([asdict(r) for r in sweep.pending.values()], indent=1))
        print(f"search: MLflow was unreachable: {len(sweep.pending)} trial runs are not in MLflow; their params, "
              f"metrics and outcomes are in {unlogged_path} (and every result is in the Optuna study)",
              file=sys.stderr, flush=True)


def _log(sweep: Sweep, run_id: str, params: Mapping[str, Any] | None = None,
         metrics: Mapping[str, float] | None = None, tags: Mapping[str, str] | None = None) -> None:
    now_ms = int(time.time() * 1000)
    param_list = [Param(k, redact(str(v))[:_MAX_PARAM_CHARS]) for k, v in (params or {}).items()]
    metric_list = [Metric(k, float(v), now_ms, 0) for k, v in (metrics or {}).items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    tag_list = [RunTag(k, redact(str(v))[:_MAX_PARAM_CHARS]) for k, v in (tags or {}).items()]
    for i in range(0, max(len(param_list), len(metric_list), len(tag_list)), _BATCH):
        sweep.client.log_batch(run_id, metrics=metric_list[i:i + _BATCH], params=param_list[i:i + _BATCH],
                               tags=tag_list[i:i + _BATCH])


def _log_series(sweep: Sweep, run_id: str, series: Mapping[str, list]) -> None:
    """Sampled telemetry (GPU utilisation, power, ...) as stepped metrics: one point per sample."""
    points = [Metric(k, float(v), ts, step) for k, values in series.items() for step, v, ts in values
              if math.isfinite(v)]
    for i in range(0, len(points), 1000):  # MLflow's per-request limit
        sweep.client.log_batch(run_id, metrics=points[i:i + 1000])


@contextmanager
def _first_contact_lock(uri: str) -> Iterator[None]:
    """Workers started together on one SQLite tracking database would each run
    MLflow's schema migrations at once and break them; the first to take this
    lock migrates, the others then find the schema current."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    with open(f"{uri[len('sqlite:///'):]}.search-lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def check_reachable() -> None:
    """Fail before anything is created when the tracking server cannot be used."""
    from search.errors import BadInput

    uri = mlflow.get_tracking_uri()
    try:
        with _first_contact_lock(uri):
            MlflowClient(uri).search_experiments(max_results=1)
    except Exception as err:  # refused connection, bad scheme, unwritable database
        reason = " ".join(str(err).split())[:200]
        raise BadInput(f"the MLflow tracking URI must be reachable; got {redact(uri)} "
                       f"({type(err).__name__}: {redact(reason)}); fix: start the server or set MLFLOW_TRACKING_URI") from None


def close_stale_runs(*run_ids: str | None) -> None:
    """Close runs a killed sweep left RUNNING as KILLED (a finished run is left alone)."""
    client = MlflowClient()
    for run_id in filter(None, run_ids):
        run = client.get_run(run_id)
        if run.info.status == "RUNNING":
            if run.data.tags.get("search.role") == "trial":
                client.set_tag(run_id, "search.outcome", "crashed")
            client.set_terminated(run_id, status="KILLED")


def log_report(run_id: str | None, files: list[Path], tags: Mapping[str, str] | None = None,
               artifact_path: str = "report") -> str | None:
    """Attach report files (and tags) to a sweep's parent run. Returns None, or
    why it could not (MLflow down): the files stay on disk either way."""
    if run_id is None:
        return "no MLflow parent run is known for this study"
    client = MlflowClient()
    try:
        for path in files:
            client.log_artifact(run_id, str(path), artifact_path)
        for key, value in (tags or {}).items():
            client.set_tag(run_id, key, redact(str(value))[:_MAX_PARAM_CHARS])
    except Exception as err:  # unreachable server, unwritable artifact store
        return f"{type(err).__name__}: {redact(' '.join(str(err).split())[:160])}"
    return None

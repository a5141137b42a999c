"""Talking to MLflow: the client's settings, whether the tracking server
answers, and writing values, series and report files to a run. Every string
that could hold a URL goes through `redact` first."""
from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from search.tracking.redact import redact

MAX_TAG_CHARS = 6000  # a param's or tag's value past this is cut (MLflow's limits: 6000 and 8000)
_BATCH = 100


def configure_client() -> None:
    """MLflow's HTTP client retries for minutes by default; a sweep would stall
    on a down server. Bounded unless the user set these themselves."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
    # MLflow prints each run's URL, userinfo included, when a run ends on an
    # http server; the sweep prints its own (redacted) pointer instead.
    os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"


LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves a local store by default
# The runs table of MLflow 3.x opens in its GenAI view unless the address asks for the model-training one
# (the experiment's mlflow.experimentKind tag alone does not change that in MLflow 3.17).
TRAINING_VIEW = "workflowType=machine_learning"


def how_to_look() -> str:
    """The command (local store) or address (server) that shows the runs."""
    uri = redact(mlflow.get_tracking_uri())
    return f"open {uri}" if uri.startswith(("http://", "https://")) else f"mlflow ui --backend-store-uri {uri}"


def ui_base() -> str:
    """The MLflow UI's address: the tracking server's (without user info: the browser asks for it), or
    that of `mlflow ui` on a local store."""
    uri = mlflow.get_tracking_uri()
    if not uri.startswith(("http://", "https://")):
        return LOCAL_UI
    parts = urlsplit(uri)
    host = parts.netloc.rsplit("@", 1)[-1]
    return redact(urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", "")))


def experiment_url(experiment_id: str) -> str:
    """The experiment's runs table, in MLflow's model-training view."""
    return f"{ui_base()}/#/experiments/{experiment_id}?{TRAINING_VIEW}"


def compare_url(run_ids: Sequence[str]) -> str | None:
    """The MLflow UI page that puts these runs side by side (params, metrics); None when there are
    fewer than two runs or MLflow does not answer."""
    run_ids = list(dict.fromkeys(r for r in run_ids if r))
    if len(run_ids) < 2:
        return None
    client = MlflowClient()
    try:
        experiments = list(dict.fromkeys(client.get_run(r).info.experiment_id for r in run_ids))
    except Exception:  # noqa: BLE001 - MLflow down or a run gone: no link, the sweep's results stand
        return None
    runs, ids = (quote(json.dumps(x, separators=(",", ":"))) for x in (run_ids, experiments))
    return f"{ui_base()}/#/compare-runs?runs={runs}&experiments={ids}"


def log_values(client: MlflowClient, run_id: str, params: Mapping[str, Any] | None = None,
               metrics: Mapping[str, float] | None = None, tags: Mapping[str, str] | None = None) -> None:
    now_ms = int(time.time() * 1000)
    param_list = [Param(k, redact(str(v))[:MAX_TAG_CHARS]) for k, v in (params or {}).items()]
    metric_list = [Metric(k, float(v), now_ms, 0) for k, v in (metrics or {}).items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    tag_list = [RunTag(k, redact(str(v))[:MAX_TAG_CHARS]) for k, v in (tags or {}).items()]
    for i in range(0, max(len(param_list), len(metric_list), len(tag_list)), _BATCH):
        client.log_batch(run_id, metrics=metric_list[i:i + _BATCH], params=param_list[i:i + _BATCH],
                               tags=tag_list[i:i + _BATCH])


def log_series(client: MlflowClient, run_id: str, series: Mapping[str, list]) -> None:
    """Sampled telemetry (GPU utilisation, power, ...) as stepped metrics: one point per sample."""
    points = [Metric(k, float(v), ts, step) for k, values in series.items() for step, v, ts in values
              if math.isfinite(v)]
    for i in range(0, len(points), 1000):  # MLflow's per-request limit
        client.log_batch(run_id, metrics=points[i:i + 1000])


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


@contextmanager
def _quiet_schema_setup() -> Iterator[None]:
    """MLflow's INFO lines while it makes a new database's tables ("Creating initial MLflow database
    tables...", alembic's "Updating database tables") would be the first lines of a first sweep: kept out."""
    loggers = [logging.getLogger(name) for name in ("mlflow.store.db.utils", "alembic")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def check_reachable() -> None:
    """Fail before anything is created when the tracking server cannot be used."""
    from search.errors import BadInput

    uri = mlflow.get_tracking_uri()
    try:
        with _first_contact_lock(uri), _quiet_schema_setup():
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


def missing_local_store() -> str | None:
    """The tracking URI when it is a local SQLite file that does not exist (a command run away from its sweep's
    directory): opening it would create an empty store, in which the sweep's runs are not. None otherwise."""
    import mlflow

    uri = mlflow.get_tracking_uri()
    return uri if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists() else None


def log_report(run_id: str | None, files: list[Path], tags: Mapping[str, str] | None = None,
               artifact_path: str = "report", metrics: Mapping[str, float] | None = None) -> str | None:
    """Attach report files (and tags, metrics) to a sweep's parent run. Returns None, or
    why it could not (MLflow down): the files stay on disk either way."""
    if run_id is None:
        return "no MLflow parent run is known for this study"
    if (uri := missing_local_store()) is not None:
        return f"no MLflow store at {uri} here; fix: MLFLOW_TRACKING_URI=<the sweep's store>"
    client = MlflowClient()
    try:
        for path in files:
            client.log_artifact(run_id, str(path), artifact_path)
        for key, value in (tags or {}).items():
            client.set_tag(run_id, key, redact(str(value))[:MAX_TAG_CHARS])
        if metrics:
            log_values(client, run_id, metrics=metrics)
    except Exception as err:  # unreachable server, unwritable artifact store
        return f"{type(err).__name__}: {redact(' '.join(str(err).split())[:160])}"
    return None

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
from dataclasses import dataclass
from typing import Any, Mapping

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from search.redact import redact

_MAX_PARAM_CHARS = 6000
_BATCH = 100


@dataclass
class Sweep:
    client: MlflowClient
    experiment_id: str
    parent_run_id: str
    study_name: str


def bound_http_retries() -> None:
    """MLflow's HTTP client retries for minutes by default; a sweep would stall
    on a down server. Bounded unless the user set these themselves."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")


def tracking_uri() -> str:
    return redact(MlflowClient().tracking_uri)


def start_sweep(experiment_name: str, study_name: str, params: Mapping[str, Any], tags: Mapping[str, str]) -> Sweep:
    client = MlflowClient()
    experiment = client.get_experiment_by_name(experiment_name)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(experiment_name)
    run = client.create_run(
        experiment_id,
        run_name=f"sweep-{time.strftime('%Y%m%d-%H%M%S')}",
        tags={"search.role": "sweep", "search.study_name": study_name, **{k: redact(str(v)) for k, v in tags.items()}},
    )
    sweep = Sweep(client, experiment_id, run.info.run_id, study_name)
    _log(sweep, run.info.run_id, params=params)
    return sweep


def start_trial(sweep: Sweep, trial_number: int, params: Mapping[str, Any]) -> str:
    run = sweep.client.create_run(
        sweep.experiment_id,
        run_name=f"trial-{trial_number}",
        tags={
            MLFLOW_PARENT_RUN_ID: sweep.parent_run_id,
            MLFLOW_RUN_NAME: f"trial-{trial_number}",
            "search.role": "trial",
            "search.study_name": sweep.study_name,
            "search.trial_number": str(trial_number),
            "search.outcome": "running",
        },
    )
    _log(sweep, run.info.run_id, params=params)
    return run.info.run_id


def log_series(sweep: Sweep, run_id: str, series: Mapping[str, list[tuple[int, float, int]]]) -> None:
    """Sampled telemetry (GPU utilisation, power, ...) as stepped metrics: one point per sample."""
    points = [Metric(k, float(v), ts, step) for k, values in series.items() for step, v, ts in values
              if math.isfinite(v)]
    for i in range(0, len(points), 1000):  # MLflow's per-request limit
        sweep.client.log_batch(run_id, metrics=points[i:i + 1000])


def end_trial(sweep: Sweep, run_id: str, outcome: str, metrics: Mapping[str, float],
              tags: Mapping[str, str]) -> None:
    all_tags = {"search.outcome": outcome, **tags}
    _log(sweep, run_id, metrics=metrics, tags=all_tags)
    sweep.client.set_terminated(run_id, status="FINISHED" if outcome == "ok" else "FAILED")


def end_sweep(sweep: Sweep, status: str, metrics: Mapping[str, float] | None = None) -> None:
    _log(sweep, sweep.parent_run_id, metrics=metrics or {})
    sweep.client.set_terminated(sweep.parent_run_id, status=status)


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


def check_reachable() -> None:
    """Fail before anything is created when the tracking server cannot be used."""
    from search.errors import BadInput

    client = MlflowClient()
    try:
        client.search_experiments(max_results=1)
    except Exception as err:  # refused connection, bad scheme, unwritable database
        reason = " ".join(str(err).split())[:200]
        raise BadInput(f"the MLflow tracking URI must be reachable; got {redact(client.tracking_uri)} "
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

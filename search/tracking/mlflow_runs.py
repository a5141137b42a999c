"""MLflow bookkeeping on MlflowClient: one parent run per sweep invocation,
one nested run per trial, kept in memory while MLflow does not answer.

Written on the client directly (optuna-integration's MLflowCallback is
deprecated) so that a trial's run exists while it trains and is closed with
its outcome even when the trial fails. Every string that could hold a URL
goes through `redact` first.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import mlflow
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from search.record import WORKER_ATTR
from search.tracking.mlflow_client import MAX_TAG_CHARS, log_series, log_values
from search.tracking.redact import redact

RUN_STATUS = {"ok": "FINISHED", "stopped_early": "KILLED"}  # stopped on purpose by early stopping
RETRY_AFTER_S = 10.0  # after a failed write, wait this long before trying MLflow again
UNLOGGED_FILE = "mlflow-unlogged.json"  # in the sweep dir: what MLflow lacked when the sweep ended
UNLOGGED_TAG = "search.unlogged_file"  # on the sweep's run: where that file would be (search/tracking/mlflow_repair.py)
# The experiment tag MLflow 3's UI reads (and its "Model training" switch writes): the experiment holds training
# runs, not GenAI traces and evaluations.
EXPERIMENT_KIND = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"
IDENTITY_TAGS = ("search.storage", "search.study_id")  # which study a run belongs to (search/sweep/study.py)


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Nested config -> dotted keys, the names MLflow params and overrides use."""
    if isinstance(cfg, dict):
        out: dict[str, Any] = {}
        for key, value in cfg.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: cfg}


@dataclass
class TrialRecord:
    """Everything one trial's run must hold, kept until MLflow has all of it."""

    number: int
    params: dict[str, Any]
    run_id: str | None = None
    name: str = ""  # the run's name (search/sweep/closing.py run_name); "" for trial-<number>
    start_tags: dict[str, str] = field(default_factory=dict)  # tags the run is made with (the study's identity, ...)
    # Which writes MLflow has confirmed. The server can stop between two of them (run made, params not);
    # the next flush goes on from the first one missing instead of skipping it.
    create_tried: bool = False  # a create whose answer was lost may have made the run: look it up first
    params_written: bool = False
    series_written: bool = False
    outcome_written: bool = False
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
    parent_metrics: dict[str, float] = field(default_factory=dict)
    parent_closed: bool = False
    # Tags every trial run carries with the parent run: which study (search.storage, search.study_id), so that
    # two studies of one name in one experiment tell apart on their trials too.
    study_identity: dict[str, str] = field(default_factory=dict)


def start_sweep(experiment_name: str, study_name: str, params: Mapping[str, Any], tags: Mapping[str, str],
                sweep_dir: Path | None = None, study_identity: Mapping[str, str] | None = None) -> Sweep:
    """The sweep's parent run. It names its worker and where the sweep will leave what MLflow could not
    take (UNLOGGED_TAG), so that the next start can replay it (search/tracking/mlflow_repair.py).
    `study_identity`: tags of the parent run and of every trial run (Sweep.study_identity)."""
    identity = {k: redact(str(v)) for k, v in (study_identity or {}).items()}
    from search.sweep.recovery import worker_id

    client = MlflowClient()
    experiment_id = _experiment_id(client, experiment_name)
    where = {UNLOGGED_TAG: str((sweep_dir / UNLOGGED_FILE).absolute())} if sweep_dir is not None else {}
    run = client.create_run(
        experiment_id,
        run_name=f"sweep-{time.strftime('%Y%m%d-%H%M%S')}",
        tags={"search.role": "sweep", "search.study_name": study_name, WORKER_ATTR: worker_id(), **where,
              **{k: redact(str(v)) for k, v in tags.items()}, **identity},
    )
    sweep = Sweep(client, experiment_id, run.info.run_id, study_name, study_identity=identity)
    try:
        log_values(sweep.client, run.info.run_id, params=params)
    except Exception:  # MLflow went away between the two calls: no parent run without its params is left
        try:
            client.delete_run(run.info.run_id)
        except Exception:
            pass  # still away: the run stays RUNNING, without params, until someone deletes it
        raise
    return sweep


def _experiment_id(client: MlflowClient, name: str) -> str:
    """The experiment's id, made if missing (workers started together race to make it), and marked
    as model training (EXPERIMENT_KIND) unless it already says what it is."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            return client.create_experiment(name, tags={EXPERIMENT_KIND: MODEL_TRAINING})
        except mlflow.exceptions.MlflowException:
            experiment = client.get_experiment_by_name(name)  # another worker made it first
            if experiment is None:
                raise
    if EXPERIMENT_KIND not in experiment.tags:  # made by an earlier version, or by hand
        try:
            client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND, MODEL_TRAINING)
        except mlflow.exceptions.MlflowException:
            pass  # a server that refuses experiment tags (permissions): the view, not the runs, is at stake
    return experiment.experiment_id


def start_trial(sweep: Sweep, trial_number: int, params: Mapping[str, Any], name: str = "",
                tags: Mapping[str, str] | None = None) -> str | None:
    """The trial's run id, or None while MLflow is unreachable (the run is made later). `name`: the run's
    name ("" for trial-<number>); `tags`: set when the run is made, with the study's identity."""
    record = TrialRecord(trial_number, dict(params), name=name,
                         start_tags={**sweep.study_identity, **{k: str(v) for k, v in (tags or {}).items()}})
    sweep.pending[trial_number] = record
    flush(sweep)
    return record.run_id


def end_trial(sweep: Sweep, trial_number: int, outcome: str, metrics: Mapping[str, float],
              tags: Mapping[str, str], series: Mapping[str, list] | None = None) -> None:
    record = sweep.pending.get(trial_number)
    if record is None:  # interrupted before its run was even asked for
        record = sweep.pending[trial_number] = TrialRecord(trial_number, {}, start_tags=dict(sweep.study_identity))
    record.ended, record.outcome = True, outcome
    record.metrics, record.tags, record.series = dict(metrics), dict(tags), dict(series or {})
    flush(sweep)


def flush(sweep: Sweep) -> None:
    """Write what MLflow lacks, oldest trial first; stop at the first failure."""
    if sweep.down_since is not None and time.monotonic() - sweep.down_since < RETRY_AFTER_S:
        return
    for number in sorted(sweep.pending):
        record = sweep.pending[number]
        if not _attempt(sweep, lambda: write_record(sweep, record)):
            return
        if record.ended:
            del sweep.pending[number]
    if sweep.parent_status is not None:
        sweep.parent_closed = _attempt(sweep, lambda: close_parent(sweep))


def close_parent(sweep: Sweep) -> None:
    log_values(sweep.client, sweep.parent_run_id, metrics=sweep.parent_metrics)
    sweep.client.set_terminated(sweep.parent_run_id, status=sweep.parent_status)


def write_record(sweep: Sweep, record: TrialRecord) -> None:
    """Write what MLflow lacks of one trial's run, each step once: a step done before an outage
    cut the rest short is not repeated (series points twice) nor skipped (a run without params)."""
    if record.run_id is None and record.create_tried:
        record.run_id = _find_trial_run(sweep, record.number)
    if record.run_id is None:
        record.create_tried = True
        name = record.name or f"trial-{record.number}"
        run = sweep.client.create_run(sweep.experiment_id, run_name=name, tags={
            **{k: redact(v)[:MAX_TAG_CHARS] for k, v in record.start_tags.items()},
            MLFLOW_PARENT_RUN_ID: sweep.parent_run_id,
            MLFLOW_RUN_NAME: name,
            "search.role": "trial",
            "search.study_name": sweep.study_name,
            "search.trial_number": str(record.number),
            "search.outcome": "running",
        })
        record.run_id = run.info.run_id
    if not record.params_written:
        log_values(sweep.client, record.run_id, params=record.params)
        record.params_written = True
    if record.ended:
        if not record.series_written:
            log_series(sweep.client, record.run_id, record.series)
            record.series_written = True
        if not record.outcome_written:
            log_values(sweep.client, record.run_id, metrics=record.metrics,
                       tags={"search.outcome": record.outcome, **record.tags})
            record.outcome_written = True
        sweep.client.set_terminated(record.run_id, status=RUN_STATUS.get(record.outcome, "FAILED"))


def run_of_killed_attempt(parent_run_id: str, number: int, params: Mapping[str, Any], name: str,
                          tags: Mapping[str, str]) -> str:
    """The MLflow run of trial `number` of a killed sweep (parent run `parent_run_id`) whose id the trial does not
    hold: the run the sweep made before it could note its id, or, killed before even that, one made now (params,
    `name` and `tags` as the sweep would have made it), so that every attempt of a trial has its run. The caller
    closes it as KILLED."""
    client = MlflowClient()
    parent = client.get_run(parent_run_id)
    sweep = Sweep(client, parent.info.experiment_id, parent_run_id, parent.data.tags.get("search.study_name", ""),
                  study_identity={k: v for k, v in parent.data.tags.items() if k in IDENTITY_TAGS})
    found = _find_trial_run(sweep, number)
    if found is not None:
        return found
    record = TrialRecord(number, dict(params), name=name, start_tags={**sweep.study_identity, **tags})
    write_record(sweep, record)
    return str(record.run_id)


def _find_trial_run(sweep: Sweep, number: int) -> str | None:
    """The run of this sweep's trial `number`, if a create whose answer never came made it."""
    runs = sweep.client.search_runs([sweep.experiment_id], f"tags.`{MLFLOW_PARENT_RUN_ID}` = '{sweep.parent_run_id}' "
                                    f"and tags.`search.trial_number` = '{number}'", max_results=1)
    return runs[0].info.run_id if runs else None


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
    """Close the sweep's run with its trials'; what MLflow still lacks goes to `unlogged_path`, which
    the next start against a reachable MLflow replays (search/tracking/mlflow_repair.py)."""
    sweep.parent_status, sweep.parent_metrics = status, dict(metrics or {})
    sweep.down_since = None  # one last try, whatever the back-off says
    flush(sweep)
    if (sweep.pending or not sweep.parent_closed) and unlogged_path is not None:
        save_unlogged(sweep, unlogged_path)
        print(f"search: MLflow was unreachable: {len(sweep.pending)} trial runs are not in MLflow, and the sweep's "
              f"run is not closed; their params, metrics and outcomes are in {unlogged_path} (and every result is "
              f"in the Optuna study); the next start against a reachable MLflow writes them",
              file=sys.stderr, flush=True)


def save_unlogged(sweep: Sweep, path: Path) -> None:
    """Written whole to a temporary file and renamed: a reader never sees half of it."""
    state = {"experiment_id": sweep.experiment_id, "parent_run_id": sweep.parent_run_id,
             "study_name": sweep.study_name, "parent_status": sweep.parent_status,
             "parent_metrics": sweep.parent_metrics, "records": [asdict(r) for r in sweep.pending.values()]}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(redact(json.dumps(state, indent=1)))
    os.replace(partial, path)


def load_unlogged(client: MlflowClient, path: Path) -> Sweep:
    """The sweep state save_unlogged wrote, ready for `flush`."""
    state = json.loads(path.read_text())
    sweep = Sweep(client, state["experiment_id"], state["parent_run_id"], state["study_name"],
                  parent_status=state["parent_status"], parent_metrics=state["parent_metrics"])
    for record in state["records"]:
        sweep.pending[record["number"]] = TrialRecord(**record)
    return sweep

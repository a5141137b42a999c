"""The Optuna side of a sweep: storage, sampler, directions, values.

Default storage is a journal file in the working directory, so re-running
the same command resumes the same study. Any SQLAlchemy URL
(`sqlite:///...`, `postgresql://...`) selects Optuna's RDB storage instead,
and `grpc://host:port` Optuna's gRPC storage proxy (search/sweep/grpc_storage.py).
"""
from __future__ import annotations

import inspect
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.utils import instantiate
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from search.errors import BadInput
from search.record import METRIC_NAMES_ATTR, STUDY_ID_ATTR
from search.sweep.journal import check_journal
from search.sweep.space import grid_values
from search.tracking.redact import redact, remember, reveal

DEFAULT_STORAGE = "optuna.journal"
_DIRECTIONS = ("maximize", "minimize")
OUR_APP = "python -m search run"


def app_command(runs_our_trials: bool) -> str:
    """This package's trial app, or the user's own Hydra app as this process was started (`python app.py`)."""
    if runs_our_trials:
        return OUR_APP
    import shlex
    import sys

    return f"python {shlex.quote(sys.argv[0])}" if sys.argv and sys.argv[0] else "python <your Hydra app>"


def study_metrics(study: optuna.Study) -> list[str]:
    """The metric each of the study's values is, or value_<i> when the study does not say."""
    names = study.metric_names or study.user_attrs.get(METRIC_NAMES_ATTR)
    return list(names) if names and len(names) == len(study.directions) else [
        f"value_{i}" for i in range(len(study.directions))]


def name_metrics(study: optuna.Study, metric_names: Sequence[str]) -> None:
    """Name the study's values: Optuna's own way (`study.set_metric_names`: optuna-dashboard's axes,
    `trials_dataframe`, the plots) and the older study attribute that studies written before hold."""
    names = list(metric_names)
    study.set_user_attr(METRIC_NAMES_ATTR, names)
    if study.metric_names != names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # stable since 3.2
            study.set_metric_names(names)


def storage_location(storage: str | None) -> str:
    """What the user sees: trial_storage with any password redacted."""
    return redact(trial_storage(storage))


def study_identity(study: optuna.Study, storage: str | None, founded: str = "") -> dict[str, str]:
    """The MLflow tags that say which study a run belongs to: its storage (search.storage, passwords redacted)
    and search.study_id, 12 hex digits made by the study's first sweep and kept on the study (system attribute
    STUDY_ID_ATTR): the same for every sweep and worker of the study, after its journal or database file moved
    or is reached by another path too (a hash of the path alone gave the runs of one study two ids after a move,
    and a study made anew in a file at the old one's path the old one's id), another for any other study. Made
    from the storage, the study's name and id there and `founded` (search/sweep/workers.py first_registration:
    the same for workers started together, so they make the same id); a study made before the id was kept,
    with trials that ran (and runs tagged with the old id), keeps the id its path gives now."""
    import hashlib

    where = storage_location(storage)
    kept = study._storage.get_study_system_attrs(study._study_id).get(STUDY_ID_ATTR)
    if not isinstance(kept, str):
        ran = any(t.state != TrialState.WAITING for t in study.get_trials(deepcopy=False))
        made = f"{where}\n{study.study_name}\n{study._study_id}" + ("" if ran else f"\n{founded}")
        study._storage.set_study_system_attr(study._study_id, STUDY_ID_ATTR,
                                             hashlib.sha256(made.encode()).hexdigest()[:12])
        kept = study._storage.get_study_system_attrs(study._study_id)[STUDY_ID_ATTR]  # what the study holds now
    return {"search.storage": where, "search.study_id": kept}


def trial_storage(storage: str | None) -> str:
    """What a trial process opens to reach the study: the URL as given (its password restored when
    the job's config holds it redacted, search/tracking/redact.py), or the journal's absolute path."""
    storage = reveal(storage)
    if storage and "://" in storage:
        return storage
    return str(Path(storage or DEFAULT_STORAGE).resolve())


def check_storage(storage: str | None) -> None:
    """The study storage answers, checked without creating anything (no journal
    file, no SQLite file, no tables), so that a later check can still fail
    with nothing left behind."""
    remember(storage)
    if storage and storage.startswith("grpc://"):
        return  # open_grpc connects and creates nothing here
    if storage and "://" in storage:
        from search.sweep.preflight import check_database_url

        check_database_url(storage)
        return
    path = Path(storage or DEFAULT_STORAGE).resolve()
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
        raise BadInput(f"the study journal's directory must exist and be writable; got {path}; "
                       f"fix: create the directory or set hydra.sweeper.storage to a writable path")


def _rdb_storage(url: str, attempts: int = 5) -> RDBStorage:
    """Optuna's RDB storage, which creates its tables on first use. Workers
    started at once on an empty database race to create them, and the
    database refuses the losers' CREATE TABLE (PostgreSQL: a unique violation
    in pg_type, or "already exists"; SQLite: an OperationalError, "table ...
    already exists") or their schema-version row; the tables then exist, and
    the next attempt uses them. Seen under load: two of three workers died
    this way and the study got a third of its trials (PostgreSQL), and one of
    two workers on a fresh SQLite file (the suite)."""
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    sqlite = url.startswith("sqlite")
    for attempt in range(1, attempts + 1):
        try:
            if not sqlite:
                return RDBStorage(url)
            # A busy database is waited for (a minute), not refused after SQLite's default 5 s.
            return _immediate_transactions(RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}}))
        except (IntegrityError, ProgrammingError, OperationalError) as err:
            if attempt == attempts or (isinstance(err, OperationalError) and "already exists" not in str(err)):
                raise
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def _immediate_transactions(storage: RDBStorage) -> RDBStorage:
    """Every transaction on this SQLite storage starts with BEGIN IMMEDIATE (SQLAlchemy's recipe for
    serializable SQLite). Optuna pops an enqueued trial by reading it WAITING and writing RUNNING "for
    update"; SQLite ignores FOR UPDATE and pysqlite begins a transaction only at the first write, so two
    workers could both read WAITING and both run the trial (Optuna issue #4002): seen here as a worker
    whose trial the other had already finished (UpdateFinishedTrialError). BEGIN IMMEDIATE takes the write
    lock before the read, so the second worker reads RUNNING and takes another trial."""
    from sqlalchemy import event

    @event.listens_for(storage.engine, "connect")
    def _no_implicit_begin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # pysqlite issues no BEGIN of its own

    @event.listens_for(storage.engine, "begin")
    def _begin_immediate(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    storage.engine.dispose()  # the connections made while the tables were created reconnect with the above
    return storage


def open_storage(storage: str | None) -> BaseStorage:
    check_storage(storage)
    if storage and storage.startswith("grpc://"):
        from search.sweep.grpc_storage import open_grpc

        return open_grpc(storage)
    if storage and "://" in storage:
        try:
            return _rdb_storage(storage)
        except Exception as err:  # refused connection, bad credentials, bad path
            reason = " ".join(str(err).split())[:200]
            raise BadInput(f"the study storage must be reachable; got {redact(storage)} ({type(err).__name__}: "
                           f"{redact(reason)}); fix: start the database or correct hydra.sweeper.storage") from None
    path = Path(storage or DEFAULT_STORAGE).resolve()
    for note in check_journal(path):
        print(f"search: {note}", flush=True)
    return JournalStorage(JournalFileBackend(str(path)))


def normalize_directions(direction: Any, metric_names: Sequence[str] | None) -> list[str]:
    directions = [direction] if isinstance(direction, str) else list(direction)
    for d in directions:
        if d not in _DIRECTIONS:
            raise BadInput(f"hydra.sweeper.direction must be maximize or minimize (or a list of them); got {d!r}; "
                           f"fix: hydra.sweeper.direction=[{','.join(_fixed_directions(directions, metric_names))}]")
    if metric_names is not None and len(metric_names) != len(directions):
        raise BadInput(f"hydra.sweeper.metrics and hydra.sweeper.direction must have the same length; got "
                       f"{list(metric_names)} and {directions}; fix: give one direction per metric")
    return directions


def _fixed_directions(directions: list[Any], metric_names: Sequence[str] | None) -> list[str]:
    """`directions` with each wrong one as `maximize`, one per metric when there are more metrics."""
    fixed = [d if d in _DIRECTIONS else "maximize" for d in directions]
    return fixed * len(metric_names) if metric_names and len(fixed) == 1 else fixed


def make_sampler(sampler_cfg: Any, seed: int | None, distributions: Mapping[str, BaseDistribution]) -> optuna.samplers.BaseSampler:
    cfg = dict(sampler_cfg or {"_target_": "optuna.samplers.TPESampler"})
    if seed is not None:
        cfg["seed"] = seed
    if cfg.get("_target_") in ("optuna.samplers.GridSampler", f"{__name__}.SweepGridSampler"):
        cfg["_target_"] = f"{__name__}.SweepGridSampler"
        cfg["search_space"] = grid_values(distributions)
    try:
        sampler = instantiate(cfg)
    except Exception as err:
        raise BadInput(f"hydra.sweeper.sampler must build an Optuna sampler; got {cfg.get('_target_')!r} "
                       f"({' '.join(str(err).split())[:160]}); fix: hydra/sweeper/sampler=tpe") from None
    _check_argument_types(sampler, cfg)
    return sampler


def _check_argument_types(sampler: Any, cfg: Mapping[str, Any]) -> None:
    """Each argument of the kind its constructor declares (by its default, or an annotation such as
    `bool | None`): a sampler keeps what it is given and uses it only later (`n_startup_trials=abc` built a
    GPSampler, ran 8 trials and then failed comparing an int with a str)."""
    parameters = inspect.signature(type(sampler).__init__).parameters
    for name, value in cfg.items():
        param = parameters.get(name)
        kind = None if param is None else _declared_kind(param)
        if kind is None or (value is None and param.default is None):
            continue
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (isinstance(value, bool) if kind == "bool" else numeric if kind == "number" else isinstance(value, str)):
            words = {"bool": "true or false", "number": "a number", "str": "a string"}[kind]
            fix = "null" if param.default is None else repr(param.default)
            raise BadInput(f"hydra.sweeper.sampler.{name} must be {words}; got {value!r}; "
                           f"fix: hydra.sweeper.sampler.{name}={fix} (its default)")


def _declared_kind(param: inspect.Parameter) -> str | None:
    """bool, number or str, when the parameter is plainly one of them (maybe None); None otherwise."""
    default = param.default
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, (int, float)):
        return "number"
    if isinstance(default, str):
        return "str"
    annotation = str(param.annotation).replace(" ", "")
    return {"bool|None": "bool", "int|None": "number", "float|None": "number", "str|None": "str",
            "bool": "bool", "int": "number", "float": "number", "str": "str"}.get(annotation)


GP_LARGE_STUDY_TRIALS = 500
# What Optuna's GPSampler imports lazily at its first model-based ask, between two trials, on the sweep's
# critical path: torch, then scipy's Sobol engine and L-BFGS-B (in a 2-knob study that first ask took 2.3 s on
# 2 cores with torch already imported, the next ones 0.2 s). The sweep imports them on a background thread while it
# waits on its first trial (search/sweep/sweeper.py).
GP_IMPORTS = ("torch", "scipy.stats.qmc", "scipy.optimize")


def large_study_notice(sampler: optuna.samplers.BaseSampler, trials: int) -> str | None:
    """GPSampler fits its Gaussian process to every trial so far on each ask:
    0.2 s at 100 trials and 5 s at 1,000 on a 2-core machine (docs/BENCHMARKS.md,
    study storage), where TPE takes 11 ms. Say so before a large study starts."""
    if not isinstance(sampler, optuna.samplers.GPSampler) or trials <= GP_LARGE_STUDY_TRIALS:
        return None
    return (f"note: this study will hold about {trials} trials; the GP sampler fits every trial on each ask "
            f"(about 5 s per trial at 1,000 trials on 2 cores); for a study this large, hydra/sweeper/sampler=tpe")


class SweepGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler, minus its `study.stop()` when the grid is used up:
    that call is only legal inside `study.optimize`, and this sweep asks and
    tells. The sweep ends itself when `is_exhausted` says so."""

    def after_trial(self, study: optuna.Study, trial: Any, state: Any, values: Any) -> None:
        return None


def load_or_create(name: str, storage: BaseStorage, directions: list[str],
                   sampler: optuna.samplers.BaseSampler) -> tuple[optuna.Study, bool]:
    """Returns the study and whether it existed, refusing a study with other directions.
    Workers started at once on a new study all find it missing and all create
    it; the storage keeps the first, and the others load that one."""
    if name not in {s.study_name for s in storage.get_all_studies()}:
        try:
            return optuna.create_study(study_name=name, storage=storage, directions=directions,
                                       sampler=sampler), False
        except optuna.exceptions.DuplicatedStudyError:
            pass  # another worker created it since we looked
    existing = {s.study_name: s for s in storage.get_all_studies()}
    have = [d.name.lower() for d in existing[name].directions]
    if have != directions:
        raise BadInput(f"study {name!r} already exists with directions {have}; got {directions}; "
                       f"fix: use the same directions or another hydra.sweeper.study_name")
    return optuna.load_study(study_name=name, storage=storage, sampler=sampler), True


def check_space_matches(study: optuna.Study, distributions: Mapping[str, BaseDistribution]) -> None:
    """Optuna refuses a categorical knob whose choices changed within a study
    (at `ask`, mid-sweep); say so before the sweep starts instead."""
    seen: dict[str, BaseDistribution] = {}
    for trial in study.get_trials(deepcopy=False):
        seen.update(trial.distributions)
    for key, dist in distributions.items():
        old = seen.get(key)
        if isinstance(old, CategoricalDistribution) and old != dist:
            raise BadInput(f"study {study.study_name!r} already searched {key} over {list(old.choices)}; got "
                           f"{getattr(dist, 'choices', dist)}; fix: keep those choices or use another "
                           f"hydra.sweeper.study_name")

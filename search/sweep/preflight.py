"""External dependencies checked before a sweep creates anything.

A bad storage or tracking URL is bad input (exit 2), and exit 2 leaves no
file, directory, study or run behind. Opening Optuna's storage creates the
journal file (or the SQLite file and its tables), and MLflow's first contact
creates and migrates `mlflow.db`; so each dependency is first checked here
in a way that creates nothing, and only then opened.
"""
from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from search.errors import BadInput
from search.tracking.redact import raw_password, redact, remember


def check_dir_writable(directory: Path, what: str, fix: str) -> None:
    """Probe by making (and removing) a directory there: permission bits alone
    say yes to root on read-only or virtual filesystems."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".search-probe-", dir=directory))
    except OSError as err:
        raise BadInput(f"{what} must be in a writable directory; got {directory} ({err.strerror}); fix: {fix}") from None


def check_sqlite_file(path: Path, what: str, fix: str) -> None:
    """An existing file must be a database this process can write; a missing
    one must be creatable. Nothing is created either way."""
    path = path.expanduser().absolute()
    if not path.parent.is_dir():
        raise BadInput(f"{what}'s directory must exist; got {path}; fix: {fix}")
    check_dir_writable(path.parent, what, fix)  # SQLite writes its journal beside the database
    if not path.exists():
        return
    try:
        with open(path, "r+b"):  # opened for writing, nothing written: EROFS, EACCES, EISDIR
            pass
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        finally:
            conn.close()
    except (OSError, sqlite3.Error) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise BadInput(f"{what} must be a writable SQLite database; got {path} ({reason}); fix: {fix}") from None


def check_database_url(url: str) -> None:
    """The study storage's SQLAlchemy URL parses as the user meant, its driver
    is installed, and its server answers (a connection, no tables made)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError
    from sqlalchemy.pool import NullPool

    remember(url)
    fix = "start the database or correct hydra.sweeper.storage"
    sqlite_fix = "point hydra.sweeper.storage at a writable file in an existing directory (sqlite:///<path>)"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise BadInput(f"the study storage must be a journal path or an SQLAlchemy URL; got {redact(url)}; "
                       f"fix: postgresql://user:password@host:5432/dbname") from None
    if "@" in (parsed.host or ""):
        raise BadInput(f"an '@' in the study storage URL's password must be written %40 (SQLAlchemy ends the "
                       f"password at the first '@'); got {redact(url)}; fix: write each '@' of the password as %40")
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:" and not parsed.database.startswith("file:"):
            check_sqlite_file(Path(parsed.database), "the study's SQLite database", sqlite_fix)
        return
    try:
        engine = create_engine(parsed, poolclass=NullPool)
    except ImportError:
        raise BadInput(f"the study storage's database driver must be installed; got {redact(url)}; "
                       f"fix: pip install 'search[postgres]' (psycopg) or the driver SQLAlchemy names") from None
    except Exception as err:  # an unknown dialect, a bad option
        raise BadInput(f"the study storage must be a URL SQLAlchemy can open; got {redact(url)} "
                       f"({type(err).__name__}); fix: postgresql://user:password@host:5432/dbname, "
                       f"sqlite:///path/to/file.db or a journal file path") from None
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as err:  # refused connection, bad credentials, unknown database
        reason = " ".join(str(err).split("(Background on this error at")[0].split())[:200]  # SQLAlchemy's link
        raise BadInput(f"the study storage must be reachable; got {redact(url)} ({type(err).__name__}: "
                       f"{redact(reason)}); fix: {fix}") from None
    finally:
        engine.dispose()


def check_tracking_uri(uri: str | None = None) -> None:
    """MLflow can use `uri` (default: MLflow's own, MLFLOW_TRACKING_URI), checked
    without creating anything: a local store's file or directory is checked on
    disk, a server is asked to list one experiment."""
    import mlflow

    uri = uri or mlflow.get_tracking_uri()
    remember(uri)
    fix = "start the server or set MLFLOW_TRACKING_URI"
    password = raw_password(uri)
    if password is not None and uri.startswith(("http://", "https://")):
        try:
            parts = urlsplit(uri)
            readable = parts.password == password and (parts.port or 0) >= 0  # .port raises on a bad port
        except ValueError:
            readable = False
        if not readable:
            raise BadInput(f"a '/', '?' or '#' in the MLflow tracking URI's password must be percent-encoded "
                           f"(%2F, %3F, %23); got {redact(uri)}; fix: percent-encode the password in "
                           f"MLFLOW_TRACKING_URI")
    if uri.startswith("sqlite:///"):
        check_sqlite_file(Path(uri[len("sqlite:///"):]), "the MLflow tracking database", fix)
        return
    if "://" not in uri or uri.startswith("file:"):
        root = Path(urlsplit(uri).path if uri.startswith("file:") else uri).absolute()
        check_dir_writable(root if root.is_dir() else root.parent, "the MLflow file store", fix)
        return
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(uri).search_experiments(max_results=1)
    except Exception as err:  # refused connection, bad scheme, a server error
        reason = " ".join(str(err).split("(Background on this error at")[0].split())[:200]  # SQLAlchemy's link
        raise BadInput(f"the MLflow tracking URI must be reachable; got {redact(uri)} "
                       f"({type(err).__name__}: {redact(reason)}); fix: {fix}") from None

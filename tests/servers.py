"""Real servers for tests, on loopback only, started and stopped by the
tests: a throwaway PostgreSQL cluster and an `mlflow server`."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import tempfile
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

def _pg_bin() -> Path:
    """PostgreSQL's server binaries: Debian's newest /usr/lib/postgresql/<major>/bin, else initdb on PATH."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(cmd: list[str]) -> list[str]:
    """initdb refuses to run as root: run the cluster as the postgres user then."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class Postgres:
    """initdb + pg_ctl on a temporary directory and port, password authentication."""

    def __init__(self, root: Path, user: str, password: str) -> None:
        self.root, self.user, self.password, self.port = root, user, password, free_port()

    @classmethod
    @contextmanager
    def throwaway(cls, user: str, password: str) -> Iterator["Postgres"]:
        """A cluster in its own directory under the system temp dir (pytest's
        are private to root, and the server runs as postgres), removed after."""
        root = Path(tempfile.mkdtemp(prefix="search-pg-"))
        pg = cls(root, user, password)
        try:
            yield pg.start()
        finally:
            pg.stop()
            shutil.rmtree(root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    def start(self) -> "Postgres":
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "pw").write_text(self.password + "\n")
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.root / "pw", "postgres")
        data = self.root / "data"
        subprocess.run(_as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-U", self.user,
                                     f"--pwfile={self.root / 'pw'}", "-A", "scram-sha-256"]),
                       check=True, capture_output=True, timeout=120)
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(self.root / "log"), "-w",
                                     "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1", "start"]),
                       check=True, capture_output=True, timeout=120)
        return self

    def create_database(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(f"CREATE DATABASE {name}")

    def connect(self):
        """A connection as the cluster's superuser, by keywords: libpq's URL parser and SQLAlchemy's
        disagree on passwords with `/`, `@` or `#`, and this one must work whatever the password."""
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user=self.user, password=self.password,
                               dbname="postgres", autocommit=True)

    def stop(self) -> None:
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate",
                                     "stop"]), capture_output=True, timeout=60)


def postgres_available() -> bool:
    return (PG_BIN / "initdb").exists() and shutil.which("runuser") is not None


class MlflowServer:
    def __init__(self, backend_uri: str, port: int | None = None) -> None:
        self.backend_uri, self.port, self.proc = backend_uri, port or free_port(), None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "MlflowServer":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port),
             "--backend-store-uri", self.backend_uri, "--workers", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            # MLflow 3's GenAI job runner starts ~8 worker processes the tests never use
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.uri}/health", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise AssertionError("mlflow server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # on a loaded machine its job workers can take longer to exit
                os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=30)

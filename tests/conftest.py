"""Shared helpers: run the real CLI in a throwaway working directory with its
own MLflow SQLite database, so tests never touch the user's files."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent  # the helper objectives (faulty_objective.py, ...) and servers.py

# MLflow 3 sends usage telemetry by default (a request to its servers from each process that logs), and opts out by
# itself only where it sees `CI` or, at its import, a running test: a test worker imports it while collecting. Off
# for this process and every command, server and benchmark the tests start: nothing here reaches past loopback.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"


def pythonpath(*paths: Path | str) -> str:
    """A child's PYTHONPATH: `paths` (the repository by default) first, then this process's own, where
    a machine may keep packages it has no other place for (a GPU box's wheels unpacked into a folder)."""
    return os.pathsep.join([*map(str, paths or (REPO,)), *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite database made by MLflow itself, once per test worker: creating
    one runs MLflow's schema migrations (~6 s on two cores), which every sweep would repeat."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    _TEMPLATE.append(path)
    return path


_TEMPLATE: list[Path] = []


def made_in(workdir: Path) -> list[str]:
    """What a command left in its working directory, the workdir fixture's untouched MLflow database aside."""
    names = sorted(p.name for p in workdir.iterdir())
    db = workdir / "mlflow.db"
    if _TEMPLATE and db.exists() and db.read_bytes() == _TEMPLATE[0].read_bytes():
        names.remove("mlflow.db")
    return names


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_mlflow_db: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copy(empty_mlflow_db, tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    return tmp_path


# No baseline and so no confirmation (docs/answer.md): they add trials every other test would count and wait for;
# tests/search/sweep/test_answer.py runs them.
NO_BASELINE = "++hydra.sweeper.baseline_repeats=0"
# No plots at the sweep's end (a 2-trial sweep: 13.1 s of CPU without them, 17.9 s with): tests that look at
# the report, or at every file a sweep writes, set hydra.sweeper.report themselves.
NO_REPORT = "++hydra.sweeper.report=false"


def cli_env(env: dict | None = None) -> dict:
    """The environment a test's CLI run gets: this process's, the repository on PYTHONPATH, a fixed width, and
    `env` on top."""
    return {**os.environ, "PYTHONPATH": pythonpath(), "COLUMNS": "200",
            "SEARCH_GPU_DEFAULT": "0",  # the same sweeps on a GPU machine (search/commands/gpu_default.py)
            **(env or {})}


def run_search(*args: str, cwd: Path, timeout_s: float = 600, env: dict | None = None,
               fresh: bool = False) -> subprocess.CompletedProcess:
    """`python -m search ARGS` in `cwd`: its exit status and output. Each run is a process of its own, forked
    from one that did the CLI's imports once (tests/cli_fork.py; test_answer.py's 42 tests took 92 busy
    CPU-seconds so, 141 fresh); `fresh`: a new interpreter, for tests about the process start itself."""
    if args and args[0] in ("multirun", "nightly") and not any("baseline_repeats" in a for a in args):
        args = (*args, NO_BASELINE)
    if args and args[0] == "multirun" and not any("hydra.sweeper.report=" in a for a in args):
        args = (*args, NO_REPORT)
    full_env = cli_env(env)
    if fresh:
        return subprocess.run([sys.executable, "-m", "search", *args], cwd=cwd, env=full_env, text=True,
                              capture_output=True, timeout=timeout_s)
    from cli_fork import shared

    return shared().run(*args, cwd=cwd, timeout_s=timeout_s, full_env=full_env)


def start_search(*args: str, cwd: Path, env: dict):
    """`python -m search ARGS` in `cwd` with exactly the environment `env`, started now and forked as
    run_search's runs are: a subprocess.Popen-like handle (cli_fork.ForkedRun) with its output captured, for
    tests that run workers side by side or kill one. Tests of signal handling start a fresh interpreter."""
    from cli_fork import shared

    return shared().start(*args, cwd=cwd, full_env=env)

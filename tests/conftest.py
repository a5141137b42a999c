"""Shared helpers: run the real CLI in a throwaway working directory with its
own MLflow SQLite database, so tests never touch the user's files."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    return tmp_path


def run_search(*args: str, cwd: Path, timeout_s: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "search", *args], cwd=cwd, env=full_env, text=True,
                          capture_output=True, timeout=timeout_s)

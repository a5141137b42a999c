"""What a sweep left behind, read with the real Optuna, MLflow and psutil: its study, its
MLflow runs by role, its processes (tagged through SEARCH_TEST_TOKEN in their environment)."""
from __future__ import annotations

import time
from pathlib import Path

import optuna
import psutil
from mlflow.tracking import MlflowClient
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from conftest import made_in


def load_study(workdir: Path, name: str = "digits") -> optuna.Study:
    return optuna.load_study(study_name=name,
                             storage=JournalStorage(JournalFileBackend(str(workdir / "optuna.journal"))))


def runs(workdir: Path, role: str) -> list:
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    return client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string=f"tags.`search.role` = '{role}'", max_results=1000)


def tagged_processes(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("SEARCH_TEST_TOKEN") == token:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def wait_gone(token: str, timeout_s: float = 15) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and tagged_processes(token):
        time.sleep(0.2)
    return tagged_processes(token)


def assert_one_line_and_nothing_created(workdir: Path, result, words: str) -> None:
    assert result.returncode == 2, (result.stdout[-2000:], result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("search: error: ") and "fix:" in lines[0], lines[0]
    assert words in lines[0], lines[0]
    assert "never proposed together" not in result.stdout  # the space's notes come once every check passed
    assert "s3cret" not in result.stdout + result.stderr
    assert not (workdir / "multirun").exists()
    journal = workdir / "optuna.journal"
    if journal.exists():
        assert JournalStorage(JournalFileBackend(str(journal))).get_all_studies() == []
    if "mlflow.db" in made_in(workdir):  # else the workdir fixture's empty template, untouched
        assert runs(workdir, "sweep") == [] and runs(workdir, "trial") == []

"""A canary password in the study storage URL (a real PostgreSQL with
password authentication) and in the MLflow tracking URL (a real `mlflow
server`) never appears in MLflow params, tags or artifacts, in Hydra's saved
configs, in the job logs or in anything the sweep prints."""
from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_search
from servers import MlflowServer, Postgres, postgres_available

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not postgres_available(), reason="PostgreSQL 15 server binaries are not installed")]

CANARY = "Canary-S3cret-7f3a"


@pytest.fixture
def postgres():
    with Postgres.throwaway("search", CANARY) as pg:
        pg.create_database("study")
        yield pg


@pytest.fixture
def mlflow_server(tmp_path_factory: pytest.TempPathFactory):
    server = MlflowServer(f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'db.sqlite'}").start()
    yield server
    server.stop()


def every_string_in_mlflow(client: MlflowClient) -> list[str]:
    found = []
    for experiment in client.search_experiments():
        found += [experiment.name, experiment.artifact_location, *experiment.tags.values()]
        for run in client.search_runs([experiment.experiment_id], max_results=1000):
            found += [*run.data.params.keys(), *run.data.params.values(), *run.data.tags.values(),
                      run.info.artifact_uri or ""]
            stack = [None]
            while stack:
                for item in client.list_artifacts(run.info.run_id, stack.pop()):
                    found.append(item.path)
                    if item.is_dir:
                        stack.append(item.path)
                    else:
                        found.append(Path(client.download_artifacts(run.info.run_id, item.path)).read_text(errors="replace"))
    return found


def test_canary_password_is_nowhere(workdir: Path, postgres: Postgres, mlflow_server: MlflowServer) -> None:
    tracking = f"http://canary:{CANARY}@127.0.0.1:{mlflow_server.port}"
    result = run_search("multirun", f"hydra.sweeper.storage={postgres.url('study')}", "hydra.sweeper.n_trials=2",
                        "train.budget_samples=300", "parallel.devices=1", cwd=workdir,
                        env={"MLFLOW_TRACKING_URI": tracking})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "postgresql://search:***@127.0.0.1" in result.stdout
    assert CANARY not in result.stdout + result.stderr

    client = MlflowClient(mlflow_server.uri)
    strings = every_string_in_mlflow(client)
    assert len(client.search_runs([client.get_experiment_by_name("digits").experiment_id])) == 3
    assert [s for s in strings if CANARY in s] == []

    saved = [p for p in (workdir / "multirun").rglob("*") if p.is_file()]
    assert any(p.name == "overrides.yaml" for p in saved) and any(p.suffix == ".log" for p in saved)
    assert [p for p in saved if CANARY in p.read_text(errors="replace")] == []
    assert [p for p in workdir.rglob("*") if p.is_file() and CANARY in p.read_text(errors="replace")] == []

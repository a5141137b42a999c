"""A canary password in the study storage URL (a real PostgreSQL with
password authentication) and in the MLflow tracking URL (a real `mlflow
server`) never appears in MLflow params, tags or artifacts, in Hydra's saved
configs, in the job logs or in anything the sweep prints, whatever characters
the password holds. The canary is two halves around the awkward characters,
so a password cut at one of them still leaves a half to find."""
from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import unquote

import optuna
import pytest
from mlflow.tracking import MlflowClient

from conftest import REPO, made_in, run_search
from servers import MlflowServer, Postgres, free_port, postgres_available

sys.path.insert(0, str(REPO))
from search.tracking.redact import redact  # noqa: E402

needs_postgres = pytest.mark.skipif(not postgres_available(), reason="PostgreSQL 15 server binaries are not installed")

HEAD, TAIL = "Kanary7f3a", "S3cretQ9"
# As written in a URL: what the issue lists, each between the halves.
SPELLINGS = ["a/b", "a b", "p@ss", "a:b", "%2Fx", "#x"]
# Every one at once, in the spelling SQLAlchemy and PostgreSQL accept ('@' as %40); PostgreSQL holds it decoded.
STORAGE_SPELLING = f"{HEAD}/ :#?%2Fx%40{TAIL}"
# requests (MLflow's client) reads user info up to the last '@', so a raw '@' and ':' work there.
TRACKING_SPELLING = f"{HEAD}:p@ss{TAIL}"


def leaks(text: str) -> bool:
    return HEAD in text or TAIL in text


@pytest.mark.parametrize("spelling", SPELLINGS + ["?x", "%40x", "/ :#?%2Fx%40"])
def test_redact_reads_the_password_as_sqlalchemy_and_urllib_do(spelling: str) -> None:
    password = f"{HEAD}{spelling}{TAIL}"
    for url in (f"postgresql://search:{password}@127.0.0.1:5432/study",
                f"postgresql+psycopg://search:{password}@db.example:5432/study?sslmode=require",
                f"http://canary:{password}@127.0.0.1:5000"):
        for text in (url, f"study 'digits' created (0 trials so far) in {url}",
                     f"got {url} (OperationalError: refused); fix: start the database",
                     f"['hydra.sweeper.storage={url}', 'batch_size=64']",
                     f"API request to {url}/api/2.0/mlflow/runs/create failed",
                     f"hydra.sweeper.storage='{url}'\nnext: line"):
            shown = redact(text)
            assert not leaks(shown), (text, shown)
            assert ":***@" in shown and shown.split("\n")[1:] == text.split("\n")[1:]
    assert redact("postgresql://search@127.0.0.1/db and sqlite:///a/b.db") == \
        "postgresql://search@127.0.0.1/db and sqlite:///a/b.db"


@pytest.fixture
def postgres():
    with Postgres.throwaway("search", unquote(STORAGE_SPELLING)) as pg:
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


def files_that_leak(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and leaks(p.read_text(errors="replace"))]


@pytest.mark.slow
@needs_postgres
def test_canary_password_is_nowhere(workdir: Path, postgres: Postgres, mlflow_server: MlflowServer) -> None:
    storage = f"postgresql://search:{STORAGE_SPELLING}@127.0.0.1:{postgres.port}/study"
    tracking = f"http://canary:{TRACKING_SPELLING}@127.0.0.1:{mlflow_server.port}"
    # One objective: Optuna's pruner applies, so each trial reports its curve to the study through the storage URL.
    # Staging off: a trial that moves only speed knobs from one already trained would run timed only, with no curve
    # (the sampler is unseeded: this sweep drew one in 22 runs here).
    result = run_search("multirun", f"hydra.sweeper.storage='{storage}'", "hydra.sweeper.n_trials=2",
                        "hydra.sweeper.metrics=[val_accuracy]", "hydra.sweeper.direction=maximize",
                        "hydra.sweeper.staging=false", "hydra.sweeper.report=true",  # its plots' pages too
                        "train.budget_samples=300", "parallel.devices=1", cwd=workdir,
                        env={"MLFLOW_TRACKING_URI": tracking})
    assert result.returncode == 0, redact(result.stderr[-3000:])
    assert f"postgresql://search:***@127.0.0.1:{postgres.port}/study" in result.stdout
    assert not leaks(result.stdout + result.stderr)

    study = optuna.load_study(study_name="digits", storage=storage)
    assert [len(t.intermediate_values) > 0 for t in study.trials] == [True, True], \
        [(t.number, t.user_attrs.get("outcome"), t.user_attrs.get("overrides")) for t in study.trials]  # the real URL

    client = MlflowClient(mlflow_server.uri)
    strings = every_string_in_mlflow(client)
    assert len(client.search_runs([client.get_experiment_by_name("digits").experiment_id])) == 3
    assert [s for s in strings if leaks(s)] == []

    saved = [p for p in (workdir / "multirun").rglob("*") if p.is_file()]
    assert any(p.name == "overrides.yaml" for p in saved) and any(p.suffix == ".log" for p in saved)
    hydra_yaml = next(p for p in saved if p.name == "hydra.yaml" and p.parent.parent.name == "0").read_text()
    assert f"storage: postgresql://search:***@127.0.0.1:{postgres.port}/study" in hydra_yaml
    assert files_that_leak(workdir) == []


@pytest.mark.slow
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_exit_2_line_of_a_down_database_hides_the_password(workdir: Path, spelling: str) -> None:
    storage = f"postgresql://search:{HEAD}{spelling}{TAIL}@127.0.0.1:{free_port()}/study"
    result = run_search("report", "--storage", storage, cwd=workdir, timeout_s=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "search: error: " in result.stderr and "postgresql://search:***@127.0.0.1:" in result.stderr
    assert not leaks(result.stdout + result.stderr)
    assert files_that_leak(workdir) == []


@pytest.mark.slow
def test_an_override_hydra_cannot_read_is_reported_without_its_password(workdir: Path) -> None:
    """An unquoted '#' is outside Hydra's override grammar: the one-line error quotes the override."""
    result = run_search("multirun", f"hydra.sweeper.storage=postgresql://search:{HEAD}#{TAIL}@127.0.0.1:1/study",
                        cwd=workdir, timeout_s=120)
    assert result.returncode == 2 and "search: error: " in result.stderr, result.stderr[-2000:]
    assert not leaks(result.stdout + result.stderr)
    assert made_in(workdir) == []


@pytest.mark.slow
def test_a_tracking_password_requests_would_misread_is_refused_without_showing_it(workdir: Path) -> None:
    """urllib and requests end the host part at the first '/': `http://u:a/b@h` would reach host `u`."""
    result = run_search("multirun", cwd=workdir, timeout_s=180,
                        env={"MLFLOW_TRACKING_URI": f"http://canary:{HEAD}/{TAIL}@127.0.0.1:{free_port()}"})
    assert result.returncode == 2 and "percent-encoded" in result.stderr, result.stderr[-2000:]
    assert "http://canary:***@127.0.0.1:" in result.stderr and not leaks(result.stdout + result.stderr)
    assert made_in(workdir) == []


def test_doctor_refuses_an_at_sign_sqlalchemy_would_read_as_the_host() -> None:
    """SQLAlchemy ends the password at the first '@', so the driver would look up the host `<tail>@127.0.0.1`
    and say so in its error: the doctor refuses the URL before connecting instead."""
    from search.commands import doctor

    check = doctor.check_storage(f"postgresql://search:{HEAD}@{TAIL}@127.0.0.1:{free_port()}/study")
    assert not check.ok and "%40" in check.detail and not leaks(check.detail), check.detail

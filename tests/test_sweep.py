"""`python -m search multirun` end to end: real Hydra, Optuna, MLflow and
training in subprocesses, in a throwaway working directory."""
from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from conftest import run_search

pytestmark = pytest.mark.slow

SMALL = ["train.budget_samples=1200", "hydra.sweeper.n_trials=4", "hydra.sweeper.seed=0"]


def load_study(workdir: Path) -> optuna.Study:
    return optuna.load_study(study_name="digits",
                             storage=JournalStorage(JournalFileBackend(str(workdir / "optuna.journal"))))


def runs(workdir: Path, role: str) -> list:
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    return client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string=f"tags.`search.role` = '{role}'", max_results=1000)


def test_four_trials_land_in_optuna_and_mlflow_and_a_rerun_resumes(workdir: Path) -> None:
    first = run_search("multirun", *SMALL, cwd=workdir)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Pareto front" in first.stdout
    assert "mlflow ui --backend-store-uri" in first.stdout
    assert str(workdir / "optuna.journal") in first.stdout

    study = load_study(workdir)
    assert len(study.trials) == 4
    trial_runs = {r.info.run_id: r for r in runs(workdir, "trial")}
    [parent] = runs(workdir, "sweep")
    assert len(trial_runs) == 4
    for trial in study.trials:
        assert trial.state == optuna.trial.TrialState.COMPLETE, trial.user_attrs
        run = trial_runs[trial.user_attrs["mlflow_run_id"]]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["search.trial_number"] == str(trial.number)
        outcome = trial.user_attrs["outcome"]
        assert run.data.tags["search.outcome"] == outcome
        for key, value in trial.params.items():
            assert run.data.params[key] == str(value)
        assert run.data.params["train.budget_samples"] == "1200"
        if outcome == "infeasible":  # e.g. 2 ranks x 2 threads on 2 cores: a violated constraint, never best
            assert run.info.status == "FAILED"
            assert trial.constraints == {"runnable": 1.0}
            continue
        assert outcome == "ok" and run.info.status == "FINISHED"
        assert trial.constraints == {"runnable": 0.0}
        for metric in ("throughput_samples_per_s", "throughput_cv", "val_accuracy", "val_loss",
                       "peak_pss_tree_bytes", "trial_wall_s"):
            assert metric in run.data.metrics
        assert trial.values == [run.data.metrics["throughput_samples_per_s"], run.data.metrics["val_accuracy"]]
    assert any(t.user_attrs["outcome"] == "ok" for t in study.trials)

    second = run_search("multirun", *SMALL, cwd=workdir)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming" in second.stdout
    study = load_study(workdir)
    assert sorted(t.number for t in study.trials) == list(range(8))
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    trial_runs = runs(workdir, "trial")
    assert len(trial_runs) == 8
    assert len({r.data.tags["search.trial_number"] for r in trial_runs}) == 8
    assert len({t.user_attrs["mlflow_run_id"] for t in study.trials}) == 8
    assert len(runs(workdir, "sweep")) == 2

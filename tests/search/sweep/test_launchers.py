"""The sweeper under Hydra's other launchers: joblib (trials in a process
pool) and submitit (its local executor here; SLURM on a cluster, see
scripts/slurm/). Both get batches of hydra.sweeper.n_jobs trials; each trial
still runs in its isolated child and is told to Optuna and MLflow once."""
from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from conftest import run_search

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("launcher, plugin", [("joblib", "hydra_plugins.hydra_joblib_launcher"),
                                              ("submitit_local", "hydra_plugins.hydra_submitit_launcher")])
def test_launcher_runs_a_batch(workdir: Path, launcher: str, plugin: str) -> None:
    pytest.importorskip(plugin)
    result = run_search("multirun", f"hydra/launcher={launcher}", "hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=2",
                        "hydra.sweeper.params=null", "batch_size=choice(32,64)", "train.budget_samples=256",
                        "hydra.sweep.dir=multirun/sweep", cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]

    study = optuna.load_study(study_name="digits",
                              storage=JournalStorage(JournalFileBackend(str(workdir / "optuna.journal"))))
    trials = [t for t in study.trials if t.user_attrs.get("outcome") != "skipped"]  # a repeat is skipped: no_repeat.py
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    assert all(t.values[0] > 0 and t.user_attrs["outcome"] == "ok" for t in trials)
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("digits").experiment_id],
                              "tags.`search.role` = 'trial'")
    assert sorted(int(r.data.tags["search.trial_number"]) for r in runs) == [t.number for t in trials]
    assert all(r.info.status == "FINISHED" for r in runs)
    sweep_dir = workdir / "multirun" / "sweep"
    for job in ("0", "1"):  # Hydra's job dirs (one per launched job) say which launcher ran the jobs
        assert f"hydra_{launcher.split('_')[0]}_launcher" in (sweep_dir / job / ".hydra" / "hydra.yaml").read_text()
    if launcher == "submitit_local":
        assert list((sweep_dir / ".submitit").glob("*/*_result.pkl"))  # the jobs went through submitit

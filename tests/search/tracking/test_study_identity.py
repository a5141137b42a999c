"""Two studies of one name (two directories, two journals) logging into one MLflow experiment: every trial run
says which study it belongs to, as its sweep's run does, and the sweep's run says what the sweep was."""
from __future__ import annotations

import shlex
from pathlib import Path

from conftest import run_search
from sweep_results import runs

TINY = ["hydra.sweeper.params=null", "batch_size=choice(32,64)", "train.budget_samples=256",
        "hydra.sweeper.n_trials=1", "hydra.sweeper.seed=3"]


def test_trial_runs_of_two_studies_of_one_name_tell_apart(workdir: Path) -> None:
    for name in ("a", "b"):
        (workdir / name).mkdir()
        done = run_search("multirun", *TINY, cwd=workdir / name)  # MLFLOW_TRACKING_URI: the workdir's database
        assert done.returncode == 0, done.stderr[-3000:]
    sweeps, trials = runs(workdir, "sweep"), runs(workdir, "trial")
    assert len(sweeps) == 2 and len(trials) == 2
    assert {r.data.tags["search.study_name"] for r in sweeps + trials} == {"digits"}  # the same name: not enough
    by_parent = {r.info.run_id: r.data.tags for r in sweeps}
    for trial in trials:
        parent = by_parent[trial.data.tags["mlflow.parentRunId"]]
        for tag in ("search.storage", "search.study_id"):
            assert trial.data.tags[tag] == parent[tag], tag
    assert {r.data.tags["search.storage"] for r in trials} == {str(workdir / d / "optuna.journal") for d in "ab"}
    assert len({r.data.tags["search.study_id"] for r in trials}) == 2
    for sweep in sweeps:  # what the sweep was
        assert sweep.data.tags["search.objective"] == "digits"
        assert shlex.split(sweep.data.tags["search.fixed_overrides"]) == ["objective=digits", "train.budget_samples=256"]
        assert sweep.data.params["sampler"] and sweep.data.params["sampler_seed"] == "3"

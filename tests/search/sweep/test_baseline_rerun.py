"""A baseline whose runs all ended infeasible (its data broken) runs again when the study resumes
(search/sweep/baseline.py `had`): kept, the study could never have the baseline's accuracy, so no answer."""
from __future__ import annotations

from pathlib import Path

import pytest
from optuna.trial import TrialState

from conftest import TESTS, pythonpath, run_search
from sweep_results import load_study

ENV = {"PYTHONPATH": pythonpath(TESTS.parent, TESTS)}
PACED = ["objective=custom", "objective.callable=paced_objective:data_from_env", "hydra.sweeper.params=null",
         "batch_size=choice(32,64,128,256)", "hydra.sweeper.seed=0", "hydra.sweeper.study_name=paced",
         "hydra.sweeper.n_trials=2"]


@pytest.mark.slow
def test_a_baseline_that_ended_infeasible_runs_again_on_resume(workdir: Path) -> None:
    args = [*PACED, "hydra.sweeper.baseline_repeats=2",
            "hydra.sweeper.confirm_budget=1.0"]
    broken = run_search("multirun", *args, cwd=workdir, env={**ENV, "SEARCH_TEST_DATA_MISSING": "1"})
    baseline = [t for t in load_study(workdir, "paced").trials if t.user_attrs.get("search.trial_role") == "baseline"]
    assert [t.user_attrs["outcome"] for t in baseline] == ["infeasible", "infeasible"], broken.stdout[-3000:]
    assert all(t.state == TrialState.COMPLETE for t in baseline)

    fixed = run_search("multirun", *args, cwd=workdir, env=ENV)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    out = " ".join(fixed.stdout.split())
    assert "measured already in this study" not in out
    assert "runs first, 2 time(s), never stopped early (again: 2 earlier run(s) of it in this study ended " \
           "without a measurement)" in out
    assert "no answer: the baseline" not in out
    baseline = [t for t in load_study(workdir, "paced").trials if t.user_attrs.get("search.trial_role") == "baseline"]
    assert sorted(t.user_attrs["outcome"] for t in baseline) == ["infeasible", "infeasible", "ok", "ok"]

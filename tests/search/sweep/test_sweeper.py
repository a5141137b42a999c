"""`python -m search multirun` end to end: real Hydra, Optuna, MLflow and
training in subprocesses, in a throwaway working directory."""
from __future__ import annotations

import os
import shlex
from pathlib import Path

import optuna
import pytest
import torch

from conftest import run_search
from sweep_results import load_study, runs
from search.record import named_constraints

pytestmark = pytest.mark.slow

SMALL = ["train.budget_samples=1200", "hydra.sweeper.n_trials=4", "hydra.sweeper.seed=0"]


def test_four_trials_land_in_optuna_and_mlflow_and_a_rerun_resumes(workdir: Path) -> None:
    first = run_search("multirun", *SMALL, "hydra.sweeper.report=true", cwd=workdir)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Pareto front" in first.stdout
    [report] = workdir.glob("multirun/*/*/report")
    assert {p.name for p in report.iterdir()} >= {"pareto_front.png", "plots.html"}
    assert "mlflow ui --backend-store-uri" in first.stdout
    assert str(workdir / "optuna.journal") in first.stdout

    study = load_study(workdir)
    assert len(study.trials) == 4
    trial_runs = {r.info.run_id: r for r in runs(workdir, "trial")}
    [parent] = runs(workdir, "sweep")
    assert len(trial_runs) == 4
    cpu_sampled = []
    for trial in study.trials:
        assert trial.state == optuna.trial.TrialState.COMPLETE, trial.user_attrs
        run = trial_runs[trial.user_attrs["mlflow_run_id"]]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["search.trial_number"] == str(trial.number)
        outcome = trial.user_attrs["outcome"]
        assert run.data.tags["search.outcome"] == outcome
        assert run.data.tags["search.worker"] == trial.user_attrs["search.worker"]  # which host and process ran it
        assert "search.heartbeat_unix_s" not in run.data.tags  # bookkeeping, stale as soon as the trial ends
        for key, value in trial.params.items():
            assert run.data.params[key] == str(value)
        assert run.data.params["train.budget_samples"] == "1200"
        # never infeasible: a pair this machine cannot run (2 ranks x 2 threads on 2 cores) is never proposed
        assert outcome == "ok" and run.info.status == "FINISHED", (outcome, trial.user_attrs.get("reason"))
        assert named_constraints(trial) == {"runnable": 0.0}
        m = run.data.metrics
        for metric in ("throughput_samples_per_s", "throughput_cv", "val_accuracy", "val_loss",
                       "peak_pss_tree_bytes", "trial_wall_s", "step_time_p50_ms", "step_time_p95_ms",
                       "data_wait_fraction", "input_bound", "peak_rss_bytes", "flops_per_sample", "params_count"):
            assert metric in m, metric
        cpu_sampled.append("cpu_util_percent_mean" in m)
        # samples per second, not per millisecond (~1 here): a floor of 100 failed at 99.1 with three test files
        # side by side on two cores, so 10 leaves room for a loaded machine
        assert 10 < m["throughput_samples_per_s"] < 1e6 and 0 <= m["throughput_cv"] < 2
        assert 0 < m["step_time_p50_ms"] <= m["step_time_p95_ms"] < 10_000
        assert 0 <= m["data_wait_fraction"] <= 1 and m["input_bound"] in (0.0, 1.0)
        assert 10e6 < m["peak_pss_tree_bytes"] < 20e9 and m["trial_wall_s"] > 0
        assert "mfu" not in m  # no honest peak on a CPU
        assert trial.values == [run.data.metrics["throughput_samples_per_s"], run.data.metrics["val_accuracy"]]
    assert any(t.user_attrs["outcome"] == "ok" for t in study.trials)
    # the CPU share is sampled from outside every 0.1 s, a reading's first one 0 by definition: a 1-second trial on
    # a loaded machine (the sweep's sampling thread starved) can end with one sample and no figure (seen once)
    assert sum(cpu_sampled) >= 2, cpu_sampled

    assert parent.data.tags["fingerprint.torch_version"] == torch.__version__
    assert study.user_attrs["fingerprint.cpu_count"] == str(os.cpu_count())
    study.set_user_attr("fingerprint.torch_version", "1.0.0")  # as if last night ran another torch

    second = run_search("multirun", *SMALL, cwd=workdir)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming" in second.stdout
    assert f"other hardware or software: torch_version: 1.0.0 -> {torch.__version__}" in second.stdout
    study = load_study(workdir)
    ran = [t for t in study.trials if t.user_attrs["outcome"] != "skipped"]  # a repeat is skipped, not run
    assert len(ran) == 8 and all(t.state == optuna.trial.TrialState.COMPLETE for t in ran)
    assert sorted(t.number for t in study.trials) == list(range(len(study.trials)))
    trial_runs = runs(workdir, "trial")
    assert sorted(int(r.data.tags["search.trial_number"]) for r in trial_runs) == sorted(t.number for t in ran)
    assert len({t.user_attrs["mlflow_run_id"] for t in ran}) == 8
    assert len(runs(workdir, "sweep")) == 2

    # hydra.sweeper.report=false (the tests' default, conftest.py): no plots, and the line says how to write them
    assert [p for p in workdir.glob("multirun/*/*/report")] == [report]
    [line] = [x for x in second.stdout.splitlines() if x.startswith("report: ")]
    assert line.startswith("report: no plots (hydra.sweeper.report=false); python -m search report "), line
    command = shlex.split(line.split("; ", 1)[1].removesuffix(" writes them"))
    later = run_search(*command[3:], cwd=workdir)  # as printed: the report the sweep would have written, where
    assert later.returncode == 0, later.stderr[-3000:]
    out = (workdir / command[command.index("--out") + 1]).resolve()
    assert out.name == "report" and out.parent.parent.parent == (workdir / "multirun").resolve()  # the second
    assert out != report.resolve()  # sweep's own directory
    assert {p.name for p in out.iterdir()} >= {"pareto_front.png", "plots.html"}

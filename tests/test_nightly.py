"""`python -m search nightly`, `report` and `export` end to end: three nights
in a row on the CPU in one storage (the third made slower on purpose), then
the report and the export of a night, and the exported overrides run again.

The trials use tests/paced_objective.py (real torch steps padded to a known
step time) through the product's user-objective path, so the verdicts do not
depend on how busy the machine's other tenants are.
"""
from __future__ import annotations

import os
from pathlib import Path

import optuna
import pytest
import yaml
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from conftest import REPO, run_search
from search.errors import EXIT_REGRESSION
from search.nightly import ROLE, VERDICT
from search.sweeper import flatten

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parent
ENV = {"PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])}
NIGHT = ["objective=custom", "objective.callable=paced_objective:objective", "hydra.sweeper.params=null",
         "batch_size=choice(32,64)", "hydra.sweeper.n_trials=2", "hydra.sweeper.seed=0",
         "hydra.sweeper.nightly.repeats=3", "hydra.sweeper.nightly.warm_start=1",
         # Throughput on a shared two-core machine drifts by tens of percent between runs; the slow night
         # below is ~7x slower per step, so a 30% floor separates the two with room to spare.
         "hydra.sweeper.nightly.min_drop=0.3"]
SLOW = "+pace.step_ms=150"  # the paced objective's steps take 20 ms by default


def night(workdir: Path, name: str, *extra: str):
    done = run_search("nightly", f"hydra.sweeper.study_name={name}", f"hydra.sweep.dir={name}", *NIGHT, *extra,
                      cwd=workdir, env=ENV, timeout_s=300)
    report = workdir / name / "report" / "nightly.md"
    assert report.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return done, report.read_text()


def load(workdir: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=JournalStorage(JournalFileBackend(str(workdir / "optuna.journal"))))


def parent_run(client: MlflowClient, study_name: str):
    [run] = client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=10,
                               filter_string=f"tags.`search.role` = 'sweep' and tags.`search.study_name` = '{study_name}'")
    return run


def test_three_nights_warm_start_regression_report_and_export(workdir: Path) -> None:
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")

    first, text = night(workdir, "night-1")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "# Nightly night-1: OK" in text and "First night of this series." in text
    best_1 = max((t for t in load(workdir, "night-1").trials if t.state.name == "COMPLETE"),
                 key=lambda t: t.values[0])
    assert best_1.params == {"batch_size": 64}  # 64 samples per 20 ms step beat 32
    topped = [t for t in load(workdir, "night-1").trials if t.user_attrs.get(ROLE) == "top_up"]
    assert len(topped) >= 1 and all(t.params == best_1.params for t in topped)  # tomorrow compares with repeats

    second, text = night(workdir, "night-2")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    trials = load(workdir, "night-2").trials
    incumbent = [t for t in trials if t.user_attrs.get(ROLE) == "incumbent"]
    warm = [t for t in trials if t.user_attrs.get(ROLE) == "warm_start"]
    assert [t.number for t in incumbent] == [0, 1, 2] and all(t.params == best_1.params for t in incumbent)
    assert [t.params for t in warm] == [{"batch_size": 32}]  # night 1's other configuration, enqueued first
    assert "versus last night's best (night-1)" in text and "No regression" in text, text
    assert "repeats tonight vs 3 before" in text
    assert "# Nightly night-2: OK" in text and "None (same as night-1)." in text
    parent = parent_run(client, "night-2")
    assert parent.data.tags["search.nightly"] == "true" and parent.data.tags[VERDICT] == "ok"
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "report")} >= {
        "report/nightly.md", "report/nightly.html", "report/pareto_front.png", "report/plots.html"}
    trial_run = client.get_run(incumbent[0].user_attrs["mlflow_run_id"])
    assert trial_run.data.tags[ROLE] == "incumbent"

    third, text = night(workdir, "night-3", SLOW)
    assert third.returncode == EXIT_REGRESSION, third.stdout[-3000:] + third.stderr[-3000:]
    assert "# Nightly night-3: REGRESSION" in text and "**REGRESSION**: last night's best (night-2" in text
    assert parent_run(client, "night-3").data.tags[VERDICT] == "regression"
    assert (workdir / "night-3" / "report" / "nightly.html").read_text().count("<h2>") == 4

    # report: the terminal table, the plots on disk, and on the night's MLflow parent run
    shown = run_search("report", "--study-name", "night-1", "--out", "rep", cwd=workdir, env=ENV)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "Pareto front of study 'night-1'" in shown.stdout
    for name in ("pareto_front.png", "importances_throughput_samples_per_s.png", "history_val_accuracy.png",
                 "knob_effect_throughput_samples_per_s.png", "plots.html"):
        assert (workdir / "rep" / name).stat().st_size > 1000, name
    assert "plotly" in (workdir / "rep" / "plots.html").read_text()[:2_000_000]

    # export: the fastest configuration of night 2 with an accuracy floor, and it runs as it was measured
    exported = run_search("export", "--study-name", "night-2", "--where", "val_accuracy >= 0.5", "--out",
                          "best.yaml", cwd=workdir, env=ENV)
    assert exported.returncode == 0, exported.stderr[-3000:]
    best = yaml.safe_load((workdir / "best.yaml").read_text())
    assert "batch_size=64" in best["overrides"] and not any(o.startswith("hydra.") for o in best["overrides"])
    assert best["fingerprint"]["torch_version"] and best["metrics"]["val_accuracy"] >= 0.5
    assert len(best["trials"]) >= 3  # the incumbent's repeats: medians, not one lucky trial
    rerun = run_search("run", *best["overrides"], "hydra.run.dir=rerun", cwd=workdir, env=ENV)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    composed = flatten(OmegaConf.to_container(OmegaConf.load(workdir / "rerun" / ".hydra" / "config.yaml"),
                                              resolve=True))
    trial = load(workdir, "night-2").trials[best["trials"][-1]]
    measured = client.get_run(trial.user_attrs["mlflow_run_id"]).data.params
    assert {k: str(v) for k, v in composed.items()} == measured

"""The study as optuna-dashboard (0.21) shows it, read through the dashboard's
own HTTP API on the journal file a sweep writes: the axes carry the metric
names, and an infeasible trial (out of memory, a broken constraint) is
infeasible there, not a feasible point at its placeholder values."""
from __future__ import annotations

import io
import json
from pathlib import Path
from wsgiref.util import setup_testing_defaults

import optuna
import pytest

from search.sweep.constraints import parse_constraints
from search.sweep.outcome import score, tell
from search.sweep.study import load_or_create, name_metrics, open_storage, study_metrics

dashboard = pytest.importorskip("optuna_dashboard")
METRICS = ["throughput_samples_per_s", "val_accuracy"]


def _get(app, path: str) -> dict:
    environ: dict = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}
    setup_testing_defaults(environ)
    status: list[str] = []
    body = b"".join(app(environ, lambda s, headers, exc_info=None: status.append(s)))
    assert status[0].startswith("200"), (status, body[:300])
    return json.loads(body)


def test_the_dashboard_names_the_axes_and_shows_infeasible_trials_as_infeasible(tmp_path: Path) -> None:
    journal = tmp_path / "optuna.journal"
    study, _ = load_or_create("digits", open_storage(str(journal)), ["maximize", "maximize"],
                              optuna.samplers.RandomSampler(seed=0))
    name_metrics(study, METRICS)
    rules = parse_constraints(["val_accuracy >= 0.9"])
    results = [{"outcome": "ok", "metrics": {"throughput_samples_per_s": 1000.0, "val_accuracy": 0.95}},
               {"outcome": "oom", "reason": "out of memory"},
               {"outcome": "ok", "metrics": {"throughput_samples_per_s": 5000.0, "val_accuracy": 0.5}}]
    for result in results:
        trial = study.ask({"batch_size": optuna.distributions.CategoricalDistribution([32, 64])})
        tell(study, trial, score(result, METRICS, 2, rules), ["maximize", "maximize"])
    assert study_metrics(study) == METRICS

    app = dashboard.wsgi(str(journal))  # what `optuna-dashboard optuna.journal` serves
    [listed] = _get(app, "/api/studies")["study_summaries"]
    detail = _get(app, f"/api/studies/{listed['study_id']}")
    assert detail["objective_names"] == METRICS  # not "Objective 0" and "Objective 1"
    feasible = [all(c <= 0 for c in t["constraints"]) for t in detail["trials"]]
    assert feasible == [True, False, False]  # the out-of-memory trial and the inaccurate one
    assert [len(t["constraints"]) for t in detail["trials"]] == [2, 2, 2]

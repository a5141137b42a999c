"""The report's plots keep matplotlib's log records out of the sweep's output
(under Hydra they reach the root logger's handlers), and leave matplotlib's
logger as they found it."""
from __future__ import annotations

import logging
import random
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution

from search.reports.plots import write_plots

METRICS = ["throughput_samples_per_s", "val_accuracy"]


def test_plots_are_written_without_matplotlib_log_records(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    space = {"batch_size": CategoricalDistribution([32, 64, 128]), "precision": CategoricalDistribution(["fp32", "bf16"]),
             "model_pruning.ratio": CategoricalDistribution([0.0, 0.25])}  # numbers as categories: matplotlib says so
    study = optuna.create_study(directions=["maximize", "maximize"])
    rng = random.Random(0)
    for _ in range(8):
        study.add_trial(optuna.trial.create_trial(
            params={k: rng.choice(d.choices) for k, d in space.items()}, distributions=space,
            values=[rng.uniform(100, 1000), rng.random()], user_attrs={"outcome": "ok"}))
    caplog.set_level(logging.DEBUG)
    plots = write_plots(study, METRICS, tmp_path)
    assert (tmp_path / "pareto_front.png").is_file() and (tmp_path / "plots.html").is_file(), plots.skipped
    assert [r.getMessage() for r in caplog.records if r.name.startswith("matplotlib")] == []
    assert logging.getLogger("matplotlib").level == logging.NOTSET

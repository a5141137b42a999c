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


def test_knob_importances_rank_what_makes_a_maximised_metric_high() -> None:
    """Optuna's default evaluator (PED-ANOVA) ranks knobs for reaching low values: for throughput the
    report asks it about the fast trials, not the slow ones. Here `workers` decides which trials are
    fast; `logging` only decides how slow the slow ones are."""
    from search.reports.plots import _importances_once, _lower_is_better

    space = {"workers": CategoricalDistribution([0, 4]), "logging": CategoricalDistribution([0, 1, 2, 3])}
    study = optuna.create_study(directions=["maximize", "maximize"])
    rng = random.Random(0)
    for _ in range(200):
        p = {"workers": rng.choice([0, 4]), "logging": rng.choice([0, 1, 2, 3])}
        throughput = 1000.0 + rng.uniform(0, 50) if p["workers"] else 100.0 / (1 + 3 * p["logging"])
        study.add_trial(optuna.trial.create_trial(params=p, distributions=space, values=[throughput, 0.9]))
    target = _lower_is_better(0, study.directions[0])
    ranked = optuna.importance.get_param_importances(study, evaluator=_importances_once(), target=target)
    assert ranked["logging"] < 0.2, ranked  # measured: 0.06
    plain = optuna.importance.get_param_importances(study, target=lambda t: t.values[0])  # what the report did
    assert plain["logging"] > 0.4, plain  # measured: 0.63: the knob that only decides how slow the slow ones are


def test_plots_keep_the_studys_trial_numbers_and_draw_one_front_point_per_configuration() -> None:
    """A failed trial, a configuration run three times (the search's run and two confirmation rounds, the
    luckiest far off), its check at a second seed, another configuration: the plots number the trials as
    the study does, and the Pareto front has one point per configuration at the median of its runs
    (as the terminal's front table), not a point per round."""
    from search.reports.plots import _configurations, _measured
    from search.record import SEED_ATTR

    space = {"batch_size": CategoricalDistribution([32, 64])}
    study = optuna.create_study(directions=["maximize", "maximize"])
    ok = {"outcome": "ok"}
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))  # trial 0
    for throughput, attrs in [(100.0, ok), (110.0, ok), (300.0, ok), (90.0, {**ok, SEED_ATTR: 1})]:  # trials 1-4
        study.add_trial(optuna.trial.create_trial(params={"batch_size": 64}, distributions=space,
                                                  values=[throughput, 0.9], user_attrs=attrs))
    study.add_trial(optuna.trial.create_trial(params={"batch_size": 32}, distributions=space,  # trial 5
                                              values=[80.0, 0.95], user_attrs=ok))

    drawn = _measured(study).get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert [(t.number, t.values[0]) for t in drawn] == [(1, 100.0), (2, 110.0), (3, 300.0), (4, 90.0), (5, 80.0)]
    points = _configurations(study).get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert [(t.number, t.values) for t in points] == [(1, [110.0, 0.9]), (5, [80.0, 0.95])]
    assert [t.values for t in study.trials[1:4]] == [[100.0, 0.9], [110.0, 0.9], [300.0, 0.9]]  # the study untouched


def test_a_slice_plots_dotted_knob_names_wrap_after_their_dots() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import optuna.visualization.matplotlib as static

    from search.reports.plots import wrap_dotted_labels

    study = optuna.create_study(directions=["maximize"])
    for i in range(4):
        study.add_trial(optuna.trial.create_trial(
            params={"memory.activation_checkpointing": i % 2 == 0, "batch_size": 16 * (i + 1)},
            distributions={"memory.activation_checkpointing": CategoricalDistribution([False, True]),
                           "batch_size": CategoricalDistribution([16, 32, 48, 64])}, values=[float(i)]))
    axes = static.plot_slice(study)
    wrap_dotted_labels(axes)
    assert sorted(ax.get_xlabel() for ax in axes.flat) == ["batch_size", "memory.\nactivation_checkpointing"]
    wrap_dotted_labels(axes)  # once only
    assert "memory.\nactivation_checkpointing" in [ax.get_xlabel() for ax in axes.flat]

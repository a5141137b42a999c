"""A configuration's figures (search/reports/choose.py): what `export`, nightly and the confirmation read."""
from __future__ import annotations

import optuna
from optuna.distributions import CategoricalDistribution

from search.record import ACCURACY_FROM_ATTR, ROLE_ATTR, SEED_ATTR
from search.reports.choose import candidates

SPACE = {"loader.num_workers": CategoricalDistribution([0, 2])}


def _add(study: optuna.Study, workers: int, metrics: dict, **attrs) -> None:
    study.add_trial(optuna.trial.create_trial(
        params={"loader.num_workers": workers}, distributions=SPACE,
        values=[metrics["throughput_samples_per_s"], metrics["val_accuracy"]],
        user_attrs={"outcome": "ok", "metrics": metrics, **attrs}))


def test_a_timed_only_run_counts_for_its_speed_not_for_how_long_it_ran_nor_its_copied_accuracy() -> None:
    """Seen in `export` of a confirmed answer: samples_trained 2,240 and steps 35, the median of one whole run
    (8,000 samples) and three timed-only confirmation rounds, where `run --from` trained 8,000."""
    study = optuna.create_study(directions=["maximize", "maximize"])
    whole = {"throughput_samples_per_s": 2000.0, "val_accuracy": 0.97, "samples_trained": 8000.0, "steps": 125.0,
             "train_loss_final": 0.31, "peak_rss_bytes": 5e8}
    _add(study, 2, whole)
    for throughput in (2400.0, 2500.0, 2600.0):  # the confirmation's rounds, timed only
        _add(study, 2, {"throughput_samples_per_s": throughput, "val_accuracy": 0.97, "samples_trained": 2240.0,
                        "steps": 35.0, "train_loss_final": 1.05, "peak_rss_bytes": 5e8},
             **{ACCURACY_FROM_ATTR: 0, ROLE_ATTR: "confirm"})
    _add(study, 2, {**whole, "val_accuracy": 0.99, "throughput_samples_per_s": 1900.0},
         **{SEED_ATTR: 1, ROLE_ATTR: "seed_check"})  # another seed: another draw of its accuracy, left out
    [c] = candidates(study.trials)
    assert [t.number for t in c.trials] == [0, 1, 2, 3]
    assert c.metrics["throughput_samples_per_s"] == 2450.0  # every run at the study's seed times it
    assert c.metrics["samples_trained"] == 8000.0 and c.metrics["steps"] == 125.0  # the whole run's
    assert c.metrics["train_loss_final"] == 0.31 and c.metrics["val_accuracy"] == 0.97


def test_a_configuration_only_timed_carries_its_accuracy_and_no_figure_of_a_whole_run() -> None:
    study = optuna.create_study(directions=["maximize", "maximize"])
    _add(study, 0, {"throughput_samples_per_s": 1500.0, "val_accuracy": 0.97, "samples_trained": 8000.0})
    _add(study, 2, {"throughput_samples_per_s": 2500.0, "val_accuracy": 0.97, "samples_trained": 2240.0},
         **{ACCURACY_FROM_ATTR: 0})
    timed = next(c for c in candidates(study.trials) if c.params == {"loader.num_workers": 2})
    assert timed.metrics == {"throughput_samples_per_s": 2500.0, "val_accuracy": 0.97}


def test_export_says_where_a_timed_only_configurations_accuracy_comes_from() -> None:
    """Seen: `run --from` an exported `loader.num_workers=2` trained to 0.9109 where the export said 0.922, your
    configuration's accuracy, which the timed-only answer carried."""
    from search.commands.export import _accuracy_note

    study = optuna.create_study(directions=["maximize", "maximize"])
    _add(study, 0, {"throughput_samples_per_s": 1500.0, "val_accuracy": 0.922})
    _add(study, 2, {"throughput_samples_per_s": 2500.0, "val_accuracy": 0.922}, **{ACCURACY_FROM_ATTR: 0})
    timed, trained = study.trials[1:], study.trials[:1]
    assert _accuracy_note(timed)["val_accuracy_from"].startswith("trial(s) 0, which trained its maths")
    assert _accuracy_note(trained) == {}

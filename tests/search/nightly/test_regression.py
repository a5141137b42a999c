"""The nightly's regression rule on numbers with known answers: a drop must
be both significant for the repeats' noise and at least min_drop."""
from __future__ import annotations

from search.nightly.regression import compare


def test_a_clear_drop_is_a_regression_and_noise_is_not() -> None:
    before = [3000.0, 3100.0, 2900.0]
    slow = compare([900.0, 880.0, 870.0], before, alpha=0.01, min_drop=0.05)
    assert slow.regressed and slow.tested and slow.p_value < 1e-4 and round(slow.change, 2) == -0.71
    same = compare([3000.0, 3050.0, 2990.0], before, alpha=0.01, min_drop=0.05)
    assert not same.regressed and same.p_value > 0.3


def test_a_significant_but_small_drop_is_not_a_regression() -> None:
    tiny = compare([3000.0, 3000.5, 3001.0], [3100.0, 3100.5, 3101.0], alpha=0.01, min_drop=0.05)
    assert tiny.p_value < 0.01 and not tiny.regressed  # -3%: real, yet under min_drop


def test_a_large_but_noisy_drop_is_not_a_regression() -> None:
    noisy = compare([1500.0, 3300.0, 2000.0], [3000.0, 1600.0, 3400.0], alpha=0.01, min_drop=0.05)
    assert noisy.change < -0.05 and noisy.p_value > 0.01 and not noisy.regressed


def test_one_earlier_measurement_is_a_fixed_value_and_none_means_no_verdict() -> None:
    one = compare([2000.0, 2050.0, 1990.0], [3100.0], alpha=0.01, min_drop=0.05)
    assert one.regressed and one.n_before == 1 and "one-sample" in one.why
    assert not compare([2000.0, 2050.0], [], alpha=0.01, min_drop=0.05).tested
    assert not compare([], [3100.0], alpha=0.01, min_drop=0.05).tested
    assert not compare([2000.0], [3100.0, 3000.0], alpha=0.01, min_drop=0.05).tested  # one repeat: no spread


def test_the_report_says_when_last_nights_best_was_another_configuration() -> None:
    """Seen in a nightly: 'versus last night's best (night-1): 2,750 -> 1,584 (-42.4%)' read as a regression; the
    night's answer had changed configuration, and the incumbent's own repeats showed no regression."""
    import optuna
    from optuna.distributions import CategoricalDistribution

    from search.nightly.morning_report import Summary, markdown
    from search.reports.choose import candidates

    study = optuna.create_study(directions=["maximize", "maximize"])
    space = {"precision": CategoricalDistribution(["fp32", "bf16"]),
             "loader.num_workers": CategoricalDistribution([0, 2])}
    for params, throughput in (({"precision": "bf16", "loader.num_workers": 0}, 1584.0),
                               ({"precision": "fp32", "loader.num_workers": 2}, 2750.0)):
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions=space, values=[throughput, 0.92],
            user_attrs={"outcome": "ok", "metrics": {"throughput_samples_per_s": throughput, "val_accuracy": 0.92}}))
    tonight, last = candidates(study.trials)
    summary = Summary("night-2", "throughput_samples_per_s", tonight, ["throughput_samples_per_s", "val_accuracy"],
                      last_night="night-1", last_best=last)
    text = markdown(summary, "ok")
    assert ("versus last night's best (night-1): 2,750 -> 1,584 (-42.4%); another configuration then "
            "(`loader.num_workers=2`, `precision=fp32`)") in text, text
    summary.last_best = tonight
    assert "another configuration" not in markdown(summary, "ok")

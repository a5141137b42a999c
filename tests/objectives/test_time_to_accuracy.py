"""Time to accuracy (train.target_val_accuracy): stop at the target, report how long it took."""

import pytest

from objectives import ConfigError, parse_config, run_trial


def test_a_reachable_target_stops_training_early_and_reports_the_time():
    result = run_trial({"train": {"budget_samples": 8000, "target_val_accuracy": 0.8, "eval_every_samples": 640}})
    assert result.outcome == "ok", result.reason
    m = result.metrics
    assert m["reached_target"] == 1.0
    assert 0 < m["time_to_accuracy_s"] <= m["train_wall_s"] + 1e-6
    assert m["samples_trained"] < 8000 and m["samples_trained"] % 640 == 0  # stopped at an evaluation
    assert m["val_accuracy"] >= 0.8  # the final metrics are the evaluation that reached the target
    assert m["target_evals"] == m["samples_trained"] / 640
    assert m["throughput_samples_per_s"] > 0


def test_an_unreachable_target_trains_the_whole_budget_and_says_so():
    result = run_trial({"train": {"budget_samples": 1000, "target_val_accuracy": 0.999}})
    m = result.metrics
    assert result.outcome == "ok"
    assert m["reached_target"] == 0.0 and "time_to_accuracy_s" not in m
    assert m["samples_trained"] == 1024  # ceil(1000 / 64) = 16 steps
    assert m["target_evals"] == 8  # every 100 samples -> every 2 steps, the last step included
    assert 0 <= m["val_accuracy"] < 0.999


def test_no_target_means_no_time_to_accuracy_metrics():
    m = run_trial({"train": {"budget_samples": 256}}).metrics
    assert "reached_target" not in m and "time_to_accuracy_s" not in m


def test_ranks_stop_together_at_the_target():
    result = run_trial({"parallel": {"devices": 2}, "train": {"budget_samples": 6000, "target_val_accuracy": 0.6,
                                                             "eval_every_samples": 512}})
    assert result.outcome == "ok", result.reason
    assert result.metrics["reached_target"] == 1.0 and result.metrics["samples_trained"] < 6000


@pytest.mark.parametrize("value", [1.01, 0.0, -0.5])
def test_target_outside_zero_to_one_is_a_config_error(value):
    with pytest.raises(ConfigError, match="train.target_val_accuracy must be null or a float in"):
        parse_config({"train": {"target_val_accuracy": value}})


def test_train_defaults_have_no_target():
    train = parse_config({}).train
    assert train.target_val_accuracy is None and train.eval_every_samples == 0
    with pytest.raises(ConfigError, match="train.eval_every_samples"):
        parse_config({"train": {"eval_every_samples": -1}})


def test_evaluating_during_training_does_not_change_the_training():
    cfg = {"train": {"budget_samples": 640}}
    plain = run_trial(cfg).metrics
    checked = run_trial({"train": {**cfg["train"], "target_val_accuracy": 0.999, "eval_every_samples": 128}}).metrics
    assert checked["train_loss_final"] == plain["train_loss_final"]
    assert checked["val_accuracy"] == plain["val_accuracy"]

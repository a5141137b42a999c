"""The numbers a user's own Hydra task returns become named metrics (search/sweep/metric_names.py)."""

import math

import torch

from search.sweep.metric_names import named_values, value_names


def test_values_are_named_value_or_value_i_as_optunas_mlflow_callback_names_them():
    assert value_names(1) == ["value"]
    assert value_names(3) == ["value_0", "value_1", "value_2"]


def test_numbers_become_a_result_with_named_metrics():
    assert named_values(1.5, ["value"]) == {"metrics": {"value": 1.5}}
    assert named_values(3, ["loss"]) == {"metrics": {"loss": 3.0}}
    assert named_values((1.0, 2), ["value_0", "value_1"]) == {"metrics": {"value_0": 1.0, "value_1": 2.0}}
    assert named_values(torch.tensor(0.25), ["value"]) == {"metrics": {"value": 0.25}}
    assert named_values([torch.tensor(1.0), 2.0], ["a", "b"]) == {"metrics": {"a": 1.0, "b": 2.0}}


def test_what_is_not_as_many_numbers_as_names_is_left_for_the_outcome_to_refuse():
    result = {"loss": 1.0}
    assert named_values(result, ["value"]) is result
    assert named_values([1.0, 2.0], ["value"]) == [1.0, 2.0]
    assert named_values("fast", ["value"]) == "fast"
    assert named_values(None, ["value"]) is None
    assert named_values(["a"], ["value"]) == ["a"]


def test_a_non_finite_value_is_a_diverged_trial_keeping_the_finite_ones():
    result = named_values([math.nan, 2.0], ["value_0", "value_1"])
    assert result["outcome"] == "diverged" and "non-finite value_0" in result["reason"]
    assert result["metrics"] == {"value_1": 2.0}

"""The custom objective's model and data, built once before the sweep creates anything (objectives/custom_check.py).
Real torch models and datasets (tests/misfit_objective.py), each a mistake a user's first sweep brought."""

import pytest

from objectives import ConfigError, parse_config
from objectives.custom_check import CLASSES, PROBABILITIES, VALUES, check_custom, check_scored

M = "misfit_objective"


def objective(model="Net", train="Blobs", val="Blobs", **extra):
    spec = {"name": "custom", "model": {"_target_": f"{M}.{model}"}, "train_dataset": {"_target_": f"{M}.{train}"}}
    if val:
        spec["val_dataset"] = {"_target_": f"{M}.{val}", "seed": 1}
    for key, value in extra.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return parse_config({"objective": spec}).objective


@pytest.mark.parametrize("kwargs, says", [
    ({"model": "NotAModule"}, "objective.model must build a torch.nn.Module; got NotAModule"),
    ({"model": {"hiden": 8}}, "objective.model must build from its arguments; got TypeError"),
    ({"train": "DictBlobs"}, "objective.train_dataset items must be (input, target) pairs; got a dict with keys x, label"),
    ({"val": "DictBlobs"}, "objective.val_dataset items must be (input, target) pairs"),
    ({"train": "StreamBlobs"}, "objective.train_dataset must be a map-style dataset; got an IterableDataset"),
    ({"train_dataset": {"size": 0}}, "objective.train_dataset must hold at least one item; got 0"),
    ({"val_dataset": {"target": "value"}, "model": {"outputs": 1}},
     "objective.loss must be set for targets that are neither class indices nor class probabilities"),
], ids=["not-a-module", "misspelt-kwarg", "dict-items", "dict-val-items", "iterable", "empty", "regression-no-loss"])
def test_a_misfit_model_or_dataset_is_one_line_naming_the_fix(kwargs, says):
    if isinstance(kwargs.get("model"), dict):
        kwargs = {**kwargs, "model": "Net", "extra_model": kwargs["model"]}
    extra_model = kwargs.pop("extra_model", None)
    obj = objective(**kwargs)
    if extra_model:
        obj.model.update(extra_model)
    with pytest.raises(ConfigError) as err:
        check_custom(obj)
    line = str(err.value)
    assert says in line and "fix:" in line and "\n" not in line, line


def test_a_missing_constructor_argument_names_the_arguments_it_takes():
    obj = objective()
    obj.model = {"_target_": "torch.nn.Linear", "in_features": 16}
    with pytest.raises(ConfigError, match=r"missing 1 required positional argument: 'out_features'.*fix: give "
                                          r"objective.model the arguments Linear takes \(in_features, out_features"):
        check_custom(obj)


def test_target_kinds_and_a_model_that_takes_only_some_batch_sizes():
    assert check_custom(objective()).targets == CLASSES
    assert check_custom(objective(val_dataset={"target": "onehot"})).targets == PROBABILITIES
    regression = objective(val_dataset={"target": "value"}, loss={"_target_": "torch.nn.MSELoss"})
    regression.model["outputs"] = 1
    checked = check_custom(regression)
    assert checked.targets == VALUES and checked.output_shape == (2, 1)
    picky = check_custom(objective(model="Picky"))  # its forward raised on two samples: left to the trial
    assert picky.targets == CLASSES and picky.output_shape is None


def test_regression_targets_cannot_give_val_accuracy():
    regression = objective(val_dataset={"target": "value"}, loss={"_target_": "torch.nn.MSELoss"})
    regression.model["outputs"] = 1
    checked = check_custom(regression)
    check_scored(checked, {"throughput_samples_per_s": "hydra.sweeper.metrics", "val_loss": "hydra.sweeper.constraints"})
    with pytest.raises(ConfigError, match=r"hydra.sweeper.metrics names val_accuracy, which needs class targets; got "
                                          r"float targets of shape \(1,\).*constraints=\['val_loss <= 0.15'\].*"
                                          r"objective.measures_accuracy=false"):
        check_scored(checked, {"val_accuracy": "hydra.sweeper.metrics"})


def test_built_in_objectives_and_functions_build_nothing():
    assert check_custom(parse_config({"objective": {"name": "digits"}}).objective) is None
    assert check_custom(parse_config({"objective": {"name": "custom", "callable": "os.path:join"}}).objective) is None

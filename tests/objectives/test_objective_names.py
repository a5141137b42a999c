"""A user's own objective has a name of its own, which names its study and MLflow experiment."""

import pytest

from objectives import ConfigError, parse_config
from objectives.config import CustomConfig
from objectives.objective_config import objective_label


def test_any_plain_name_is_a_users_own_objective_with_the_custom_section():
    by_callable = parse_config({"objective": {"name": "blobs", "callable": "mypkg.train:objective"}}).objective
    by_model = parse_config({"objective": {"name": "mlp-v2", "model": {"_target_": "mypkg.models.Mlp"},
                                           "train_dataset": {"_target_": "mypkg.data.Blobs"}}}).objective
    assert isinstance(by_callable, CustomConfig) and by_callable.name == "blobs"
    assert isinstance(by_model, CustomConfig) and by_model.name == "mlp-v2" and by_model.measures_accuracy is False


@pytest.mark.parametrize("objective, says", [
    ({"name": "mnist"}, "got 'mnist', with neither; fix: objective.name=digits"),
    ({"name": "my model", "callable": "m:f"}, "got 'my model'; fix: objective.name=my_model"),
    ({"name": "blobs", "model": {"_target_": "m.Net"}}, "got no train_dataset"),
    ({"name": "blobs", "callable": "m:f", "channels": [1]}, "valid keys are name, callable, model"),
])
def test_a_name_that_is_neither_built_in_nor_a_usable_own_objective_is_one_line(objective, says):
    with pytest.raises(ConfigError) as err:
        parse_config({"objective": objective})
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_study_is_named_after_the_objective_its_model_or_its_callable():
    assert objective_label({"name": "gpt", "size": "tiny"}) == "gpt"
    assert objective_label({"name": "blobs", "callable": "mypkg.train:objective"}) == "blobs"
    assert objective_label({"name": "custom", "model": {"_target_": "mypkg.models.Mlp", "hidden": 8},
                            "train_dataset": {"_target_": "mypkg.data.Blobs"}}) == "mypkg.models.Mlp"
    assert objective_label({"name": "custom", "callable": "mypkg.train:objective"}) == "mypkg.train.objective"
    assert objective_label({"name": "custom"}) == "custom"

"""The user's own objective without Hydra: a callable, or _target_ specs trained with every knob."""

import textwrap
import uuid

import pytest

from objectives import ConfigError, parse_config, run_trial
from objectives.instantiate import instantiate

USER_MODULE = '''
import torch
from torch import nn
from torch.utils.data import Dataset


def objective(cfg):
    """A user's own training: reads what it wants from the whole trial config."""
    return {"score": 1.0 + cfg.get("batch_size", 0), "val_accuracy": 0.5}


def not_a_dict(cfg):
    return [1.0]


class Blobs(Dataset):
    """Four Gaussian blobs in `dim` dimensions: separable, so accuracy climbs fast."""

    def __init__(self, size, seed, dim=16):
        g = torch.Generator().manual_seed(seed)
        centers = torch.randn(4, dim, generator=torch.Generator().manual_seed(0)) * 3
        self.y = torch.arange(size) % 4
        self.x = centers[self.y] + torch.randn(size, dim, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self, dim, hidden, activation, classes=4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, hidden), activation, nn.Linear(hidden, hidden), activation)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.body(x))


class Linear(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.only = nn.Linear(dim, 4)

    def forward(self, x):
        return self.only(x)
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    name = f"user_objective_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def specs(mod, val=True):
    objective = {
        "name": "custom",
        "model": {"_target_": f"{mod}.Net", "dim": 16, "hidden": 64, "activation": {"_target_": "torch.nn.ReLU"}},
        "train_dataset": {"_target_": f"{mod}.Blobs", "size": 512, "seed": 1},
    }
    if val:
        objective["val_dataset"] = {"_target_": f"{mod}.Blobs", "size": 256, "seed": 2}
    return objective


def test_callable_gets_the_whole_config_and_its_metrics_are_reported(user_module, capfd):
    result = run_trial({"objective": {"name": "custom", "callable": f"{user_module}:objective"}, "batch_size": 32})
    assert result.outcome == "ok"
    assert result.metrics == {"score": 33.0, "val_accuracy": 0.5}
    assert result.info["knobs_not_applied"] == "batch_size,optim,loader,precision,model_pruning,parallel,train"
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: objective custom: knobs not applied")


def test_a_callable_that_declares_its_knobs_is_not_warned_about_the_others(user_module, capfd):
    """The sweep says in its own line which knobs it does not search (`not searched: ...`); a warning on top, on
    every trial of a sweep that declared `objective.knobs`, read as noise."""
    objective = {"name": "custom", "callable": f"{user_module}:objective", "knobs": ["batch_size"]}
    result = run_trial({"objective": objective, "batch_size": 32})
    assert result.outcome == "ok"
    assert result.info["knobs_not_applied"] == "optim,loader,precision,model_pruning,parallel,train"
    assert "knobs_not_applied_warning" not in result.info and "knobs not applied" not in capfd.readouterr().err


def test_callable_also_takes_a_dotted_path(user_module):
    assert run_trial({"objective": {"name": "custom", "callable": f"{user_module}.objective"}}).metrics["score"] == 1.0  # no batch_size in this dict


def test_callable_returning_no_metrics_dict_is_an_error(user_module):
    with pytest.raises(TypeError, match="dict of metric name"):
        run_trial({"objective": {"name": "custom", "callable": f"{user_module}:not_a_dict"}})


def test_missing_callable_is_a_one_line_config_error(user_module):
    with pytest.raises(ConfigError) as err:
        run_trial({"objective": {"name": "custom", "callable": f"{user_module}:nope"}})
    assert "objective.callable" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="importable module"):
        run_trial({"objective": {"name": "custom", "callable": "no_such_pkg_xyz.mod:fn"}})


def test_target_specs_train_with_every_knob_applied(user_module):
    cfg = {
        "objective": specs(user_module),
        "batch_size": 32,
        "loader": {"num_workers": 2},
        "model_pruning": {"ratio": 0.5, "method": "structured"},
        "train": {"budget_samples": 1024},
    }
    result = run_trial(cfg)
    assert result.outcome == "ok", result.reason
    m = result.metrics
    assert m["params_count"] < 0.6 * m["params_count_before_model_pruning"]
    assert m["loader_worker_processes"] >= 2
    assert m["samples_trained"] == 1024 and m["lr_effective"] == pytest.approx(0.005 * (32 / 64) ** 0.5)
    assert m["val_accuracy"] > 0.5  # chance is 0.25
    assert "knobs_not_applied" not in result.info
    assert parse_config(cfg).objective.measures_accuracy is True


def test_target_specs_with_a_bf16_model_and_a_loss_spec(user_module):
    objective = {**specs(user_module), "loss": {"_target_": "torch.nn.CrossEntropyLoss", "label_smoothing": 0.1}}
    result = run_trial({"objective": objective, "precision": "bf16", "train": {"budget_samples": 512}})
    assert result.outcome == "ok" and result.info["autocast_dtype"] == "torch.bfloat16"
    assert 0 <= result.metrics["val_accuracy"] <= 1


def test_knobs_that_cannot_apply_are_reported_not_ignored(user_module, capfd):
    objective = {**specs(user_module, val=False), "model": {"_target_": f"{user_module}.Linear", "dim": 16}}
    result = run_trial({
        "objective": objective,
        "model_pruning": {"ratio": 0.5},
        "train": {"budget_samples": 256, "target_val_accuracy": 0.9},
    })
    assert result.outcome == "ok"
    assert result.info["knobs_not_applied"] == "model_pruning,train.target_val_accuracy"
    assert result.metrics["params_count"] == result.metrics["params_count_before_model_pruning"]
    assert "val_accuracy" not in result.metrics and "val_loss" not in result.metrics
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model_pruning (structured: no Conv or Linear" in err[0]


def test_unstructured_model_pruning_applies_to_a_single_linear(user_module):
    objective = {**specs(user_module, val=False), "model": {"_target_": f"{user_module}.Linear", "dim": 16}}
    result = run_trial({"objective": objective, "model_pruning": {"ratio": 0.5, "method": "unstructured"},
                        "train": {"budget_samples": 128}})
    assert "knobs_not_applied" not in result.info
    assert result.metrics["params_nonzero"] < result.metrics["params_count"]


def test_custom_trains_on_two_ddp_ranks(user_module):
    result = run_trial({"objective": specs(user_module), "parallel": {"devices": 2}, "batch_size": 32,
                        "train": {"budget_samples": 512}})
    assert result.outcome == "ok", result.reason
    assert result.info["world_size"] == "2" and result.metrics["samples_trained"] == 512


def test_instantiate_builds_nested_targets_and_positional_args():
    built = instantiate({"_target_": "torch.nn.Sequential", "_args_": [{"_target_": "torch.nn.Linear", "in_features": 2, "out_features": 3}, {"_target_": "torch.nn.ReLU"}]})
    assert [type(m).__name__ for m in built] == ["Linear", "ReLU"]
    assert instantiate({"a": [1, {"_target_": "builtins.dict", "x": 1}]}) == {"a": [1, {"x": 1}]}
    with pytest.raises(ConfigError, match="_partial_"):
        instantiate({"_target_": "builtins.dict", "_partial_": True})


CUSTOM_BAD = [
    ({"name": "custom"}, "needs callable, or model and train_dataset"),
    ({"name": "custom", "callable": "m:f", "model": {"_target_": "m.Net"}}, "objective.callable excludes model"),
    ({"name": "custom", "model": {"_target_": "m.Net"}}, "got no train_dataset"),
    ({"name": "custom", "model": {"target": "m.Net"}, "train_dataset": {"_target_": "m.D"}}, "objective.model must be a mapping with _target_"),
    ({"name": "custom", "model": {"_target_": "m.Net"}, "train_dataset": {"_target_": "m.D"}, "measures_accuracy": True},
     "objective.measures_accuracy must be false or null without objective.val_dataset"),
    ({"name": "custom", "callable": "m:f", "channels": [1]}, "valid keys are name, callable, model"),
]


@pytest.mark.parametrize("objective, says", CUSTOM_BAD, ids=[str(b[0]) for b in CUSTOM_BAD])
def test_custom_sections_are_checked_in_one_line(objective, says):
    with pytest.raises(ConfigError) as err:
        parse_config({"objective": objective})
    assert says in str(err.value) and "fix:" in str(err.value) and "\n" not in str(err.value)

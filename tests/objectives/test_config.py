"""parse_config: strict types and values, one-line errors that name the value and the fix."""

import json

import pytest

from objectives import ConfigError, TrialConfig, TrialResult, parse_config
from objectives.config import PRECISIONS


def test_empty_dict_gives_the_documented_defaults():
    cfg = parse_config({})
    assert cfg == TrialConfig()
    assert cfg.batch_size == 64 and cfg.precision == "fp32"
    assert cfg.objective.channels == [16, 32] and cfg.optim.lr == 0.005
    assert cfg.train.budget_samples == 8000 and cfg.model_pruning.method == "structured"


def test_unknown_top_level_sections_are_ignored():
    cfg = parse_config({"trial": {"timeout_s": 60}, "hydra": {"x": 1}, "batch_size": 32})
    assert cfg.batch_size == 32


def test_values_are_read_from_every_section():
    cfg = parse_config(
        {
            "objective": {"name": "digits", "image_size_px": 16, "augment": False, "val_fraction": 0.3, "channels": [8]},
            "batch_size": 128,
            "optim": {"lr": 1, "base_batch_size": 32, "lr_scaling": "linear", "weight_decay": 0.01},
            "loader": {"num_workers": 2, "pin_memory": True, "persistent_workers": True, "prefetch_factor": 4},
            "precision": "bf16",
            "model_pruning": {"ratio": 0.9, "method": "unstructured"},
            "parallel": {"devices": 2, "threads": 3},
            "train": {"budget_samples": 10, "warmup_steps": 0, "window_steps": 1, "seed": 7, "eval_batch_size": 1},
        }
    )
    assert cfg.optim.lr == 1.0 and isinstance(cfg.optim.lr, float)
    assert cfg.objective.channels == [8] and cfg.loader.prefetch_factor == 4
    assert cfg.model_pruning.ratio == 0.9 and cfg.parallel.threads == 3


BAD = [
    ({"precision": "fp64"}, "fp64", "precision=bf16"),
    ({"batch_size": 0}, "0", "batch_size=64"),
    ({"batch_size": True}, "True", "batch_size="),
    ({"batch_size": 64.0}, "64.0", "batch_size="),
    ({"batch_size": "64"}, "'64'", "batch_size="),
    # a number as text, as ${oc.env:VAR} resolves: the fix says how to read it as a number
    ({"train": {"budget_samples": "2000"}}, "'2000', text (as ${oc.env:VAR} gives)",
     "fix: train.budget_samples=$VAR on the command line (the shell expands it), or ${oc.decode:${oc.env:VAR}} in"),
    ({"optim": {"lr": "1e-3"}}, "'1e-3', text", "${oc.decode:${oc.env:VAR}}"),
    ({"model_pruning": {"ratio": 0.95}}, "0.95", "model_pruning.ratio="),
    ({"model_pruning": {"ratio": -0.1}}, "-0.1", "model_pruning.ratio="),
    ({"model_pruning": {"method": "4:8"}}, "'4:8'", "model_pruning.method=structured"),
    ({"model_pruning": {"ratio": False}}, "False", "model_pruning.ratio="),
    ({"loader": {"num_workers": -1}}, "-1", "loader.num_workers="),
    ({"loader": {"prefetch_factor": 0}}, "0", "loader.prefetch_factor="),
    ({"loader": {"pin_memory": 1}}, "1", "loader.pin_memory="),
    ({"parallel": {"devices": 0}}, "0", "parallel.devices="),
    ({"parallel": {"threads": 0}}, "0", "parallel.threads="),
    ({"optim": {"lr_scaling": "cubic"}}, "'cubic'", "optim.lr_scaling="),
    ({"optim": {"lr": 0}}, "0", "optim.lr="),
    ({"optim": {"lr": float("nan")}}, "nan", "optim.lr="),
    ({"objective": {"name": "mnist"}}, "'mnist'", "objective.name=digits"),
    ({"objective": {"channels": []}}, "[]", "objective.channels="),
    ({"objective": {"channels": [16, 0]}}, "[16, 0]", "objective.channels="),
    ({"objective": {"augment": "yes"}}, "'yes'", "objective.augment="),
    ({"train": {"budget_samples": 0}}, "0", "train.budget_samples="),
    ({"train": {"window_steps": 0}}, "0", "train.window_steps="),
    ({"model_pruning": {"ratoi": 0.5}}, "'ratoi'", "ratio, method"),
    ({"loader": "fast"}, "'fast'", "fix: remove loader"),
]


@pytest.mark.parametrize("cfg, shows_value, shows_fix", BAD, ids=[json.dumps(b[0], default=str) for b in BAD])
def test_bad_values_give_one_line_errors_with_value_and_fix(cfg, shows_value, shows_fix):
    with pytest.raises(ConfigError) as err:
        parse_config(cfg)
    message = str(err.value)
    assert "\n" not in message
    assert shows_value in message
    assert shows_fix in message
    assert "fix:" in message


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_every_precision_parses_on_any_machine():
    for precision in PRECISIONS:
        compiled = {"parallel": {"compile": "default"}} if precision == "fp8" else {}  # fp8 needs compile
        assert parse_config({"precision": precision, **compiled}).precision == precision


def test_trial_result_round_trips_through_json():
    result = TrialResult("ok", {"val_accuracy": 0.9, "throughput_samples_per_s": 1e3}, {"world_size": "2"})
    again = TrialResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result and again.reason == ""

"""The contract every objective meets, whatever it trains: one suite, every workload."""

import json
import math

import pytest

from objectives import parse_config, run_trial

WORKLOADS = {
    "digits": {"objective": {"name": "digits"}},
    "gpt": {"objective": {"name": "gpt", "val_batches": 1}, "train": {"eval_batch_size": 32}},
    "resnet": {"objective": {"name": "resnet", "image_size_px": 32, "widths": [8, 16]}},
    "custom": {
        "objective": {
            "name": "custom",
            "model": {"_target_": "torch.nn.Sequential", "_args_": [
                {"_target_": "torch.nn.Flatten"},
                {"_target_": "torch.nn.Linear", "in_features": 3 * 16 * 16, "out_features": 32},
                {"_target_": "torch.nn.ReLU"},
                {"_target_": "torch.nn.Linear", "in_features": 32, "out_features": 10},
            ]},
            "train_dataset": {
                "_target_": "objectives.resnet.SyntheticImages", "size": 256, "image_size_px": 16, "num_classes": 10
            },
        }
    },
}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCH_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_objective_reports_the_shared_metrics_and_only_the_accuracy_it_measures(name):
    cfg = {**WORKLOADS[name], "batch_size": 32, "train": {**WORKLOADS[name].get("train", {}), "budget_samples": 256}}
    result = run_trial(cfg)
    assert result.outcome == "ok", result.reason
    m = result.metrics
    for key in ("throughput_samples_per_s", "throughput_cv", "step_time_p50_ms", "step_time_p95_ms", "params_count",
                "params_count_before_model_pruning", "flops_per_sample", "peak_rss_bytes", "samples_trained"):
        assert key in m, key
    assert all(isinstance(v, float) and math.isfinite(v) for v in m.values())
    assert m["samples_trained"] == 256
    measures = parse_config(cfg).objective.measures_accuracy
    assert ("val_accuracy" in m) == measures and ("val_loss" in m) == measures
    if measures:
        assert 0 <= m["val_accuracy"] <= 1
    json.dumps(result.to_dict(), allow_nan=False)

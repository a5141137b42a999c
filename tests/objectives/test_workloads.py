"""gpt and resnet through run_trial, the stdlib corpus behind gpt, and the digits' data."""

import hashlib
import math
from pathlib import Path

import pytest

from objectives import ConfigError, parse_config, run_trial
from objectives.config import GptConfig, ResnetConfig
from objectives.corpus import build_corpus, cache_dir

COMMON = [
    "throughput_samples_per_s",
    "throughput_cv",
    "step_time_p50_ms",
    "step_time_p95_ms",
    "params_count",
    "params_count_before_model_pruning",
    "flops_per_sample",
    "peak_rss_bytes",
    "samples_trained",
    "train_wall_s",
]
GPT_SMALL = {
    "objective": {"name": "gpt", "val_batches": 2},
    "optim": {"lr": 0.002},
    "train": {"budget_samples": 1280, "eval_batch_size": 64},
}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCH_CACHE_DIR", str(tmp_path / "cache"))


def test_gpt_tiny_learns_bytes_and_reports_tokens_per_second():
    result = run_trial(GPT_SMALL)
    assert result.outcome == "ok", result.reason
    m = result.metrics
    assert sorted(set(COMMON + ["val_loss", "val_accuracy", "throughput_tokens_per_s", "model_flops_per_token"]) - set(m)) == []
    assert m["throughput_tokens_per_s"] == pytest.approx(m["throughput_samples_per_s"] * 64)
    assert 0 <= m["val_accuracy"] <= 1
    assert math.isfinite(m["val_loss"]) and m["val_loss"] < math.log(256) - 1  # uniform guessing is ln 256
    assert m["samples_trained"] == 1280
    # 6N + 12 * n_layer * d_model * seq_len, N = every parameter but the 64 x 64 position embedding
    # (the 256 x 64 token embedding is also the tied head's matmul weight)
    matmul_params = m["params_count"] - 64 * 64
    assert m["model_flops_per_token"] == 6 * matmul_params + 12 * 2 * 64 * 64
    assert "knobs_not_applied" not in result.info


def test_gpt_structured_model_pruning_shrinks_the_mlp_and_still_trains():
    m = run_trial({**GPT_SMALL, "model_pruning": {"ratio": 0.5}, "train": {"budget_samples": 256, "eval_batch_size": 64}}).metrics
    # each of 2 layers loses half of its 256 MLP hidden channels: 2 x 128 x (64 + 1 + 64) parameters
    assert m["params_count_before_model_pruning"] - m["params_count"] == 2 * 128 * (64 + 1 + 64)
    assert m["flops_per_sample"] < m["flops_per_sample_before_model_pruning"]
    assert math.isfinite(m["val_loss"])


def test_gpt_seq_len_overrides_the_size_default():
    cfg = {**GPT_SMALL, "objective": {"name": "gpt", "seq_len": 32, "val_batches": 1}, "train": {"budget_samples": 128, "eval_batch_size": 16}}
    m = run_trial(cfg).metrics
    assert m["throughput_tokens_per_s"] == pytest.approx(m["throughput_samples_per_s"] * 32)


def test_corpus_is_deterministic_disjoint_and_cached(tmp_path):
    first = build_corpus(300_000, 0.1, tmp_path / "a")
    second = build_corpus(300_000, 0.1, tmp_path / "b")
    assert first.built and second.built
    for split in ("train", "val"):
        a, b = getattr(first, split), getattr(second, split)
        assert hashlib.sha256(a.tobytes()).hexdigest() == hashlib.sha256(b.tobytes()).hexdigest()
    assert not set(first.train_files) & set(first.val_files)
    assert len(first.val_files) >= 1 and 200_000 < len(first.train) + len(first.val) <= 300_000
    assert all(not name.startswith("test") for name in first.train_files + first.val_files)
    mtime = first.path.stat().st_mtime_ns
    again = build_corpus(300_000, 0.1, tmp_path / "a")
    assert not again.built and again.path == first.path and first.path.stat().st_mtime_ns == mtime
    assert (again.train == first.train).all() and (again.val == first.val).all()
    assert build_corpus(300_000, 0.2, tmp_path / "a").path != first.path  # the rule is in the key


def test_corpus_cache_dir_honours_search_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCH_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    assert build_corpus(100_000, 0.1).path.parent == tmp_path / "mine"
    monkeypatch.delenv("SEARCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "search"


RESNET_SMALL = {"objective": {"name": "resnet"}, "train": {"budget_samples": 256}}


def test_resnet_reports_throughput_and_no_accuracy():
    result = run_trial(RESNET_SMALL)
    assert result.outcome == "ok", result.reason
    m = result.metrics
    assert sorted(set(COMMON) - set(m)) == []
    assert "val_accuracy" not in m and "val_loss" not in m and "eval_wall_s" not in m
    assert m["throughput_samples_per_s"] > 0 and m["samples_trained"] == 256


def test_resnet_structured_model_pruning_lowers_params_and_flops():
    m = run_trial({**RESNET_SMALL, "model_pruning": {"ratio": 0.5, "method": "structured"}}).metrics
    assert m["params_count"] < 0.6 * m["params_count_before_model_pruning"]
    assert m["flops_per_sample"] < 0.6 * m["flops_per_sample_before_model_pruning"]


def test_resnet_reports_a_time_to_accuracy_target_as_not_applied(capfd):
    result = run_trial({**RESNET_SMALL, "objective": {"name": "resnet", "widths": [8], "image_size_px": 32},
                        "train": {"budget_samples": 64, "target_val_accuracy": 0.5}})
    assert result.outcome == "ok"
    assert result.info["knobs_not_applied"] == "train.target_val_accuracy"
    assert "reached_target" not in result.metrics
    err = capfd.readouterr().err
    assert "warning: objective resnet: knobs not applied: train.target_val_accuracy" in err


def test_objective_sections_default_to_the_documented_yaml():
    assert parse_config({"objective": {"name": "gpt"}}).objective == GptConfig(
        name="gpt", size="tiny", seq_len=None, corpus_max_bytes=2_000_000, val_fraction=0.1, val_batches=8,
        measures_accuracy=True,
    )
    assert parse_config({"objective": {"name": "resnet"}}).objective == ResnetConfig(
        name="resnet", image_size_px=64, widths=[32, 64, 128], blocks_per_stage=1, num_classes=1000,
        dataset_size=2048, measures_accuracy=False,
    )
    assert parse_config({}).objective.measures_accuracy is True


BAD = [
    ({"name": "gpt", "channels": [8]}, "valid keys are name, size, seq_len"),
    ({"name": "digits", "seq_len": 8}, "valid keys are name, image_size_px"),
    ({"name": "resnet", "size": "tiny"}, "valid keys are name, image_size_px, widths"),
    ({"name": "gpt", "size": "gpt2-xl"}, "objective.size must be one of tiny, gpt2-small"),
    ({"name": "gpt", "seq_len": 0}, "objective.seq_len"),
    ({"name": "gpt", "seq_len": "64"}, "objective.seq_len must be an int"),
    ({"name": "resnet", "measures_accuracy": True}, "objective.measures_accuracy must be false"),
    ({"name": "resnet", "widths": []}, "objective.widths"),
]


@pytest.mark.parametrize("objective, says", BAD, ids=[str(b[0]) for b in BAD])
def test_objective_keys_are_checked_per_name_in_one_line(objective, says):
    with pytest.raises(ConfigError) as err:
        parse_config({"objective": objective})
    assert says in str(err.value) and "fix:" in str(err.value) and "\n" not in str(err.value)


def test_the_digits_are_sklearns_and_reading_them_imports_no_sklearn() -> None:
    """Read from the file scikit-learn ships, the same arrays as sklearn.datasets.load_digits; a trial
    process (and the forkserver that preloads the workloads) never imports scikit-learn for them."""
    import subprocess
    import sys

    import numpy as np
    from sklearn.datasets import load_digits

    from objectives.digits import load_digits_arrays

    images, labels = load_digits_arrays()
    expected = load_digits()
    assert np.array_equal(images, expected.images) and np.array_equal(labels, expected.target)
    code = ("import sys; import objectives.run; from objectives.digits import load_digits_arrays; "
            "load_digits_arrays(); print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           cwd=Path(__file__).resolve().parents[2])
    assert shown.returncode == 0 and shown.stdout.strip() == "[]", shown.stdout + shown.stderr[-2000:]


def test_a_budget_too_small_to_warm_up_says_so_once_with_the_fix(capfd):
    """Was: `train.budget_samples=10` gave outcome ok and a throughput of one untimed-warm-up step."""
    from objectives.result import THROUGHPUT_WARNING

    tiny = run_trial({"train": {"budget_samples": 100}})  # 2 steps of 64: the windows took the warm-up step
    assert tiny.outcome == "ok" and tiny.metrics["throughput_warmup_steps"] == 0
    assert tiny.info[THROUGHPUT_WARNING].endswith("fix: train.budget_samples=256 or more (a warm-up step and 3 "
                                                  "timed ones)")
    assert capfd.readouterr().err.count("no warm-up step before the timed windows") == 1
    assert THROUGHPUT_WARNING not in run_trial({"train": {"budget_samples": 512}}).info  # 8 steps: 5 warm up

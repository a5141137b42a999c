"""The step-level knobs (compile, gradient accumulation, activation
checkpointing, augmentation on the device, channels_last, fused optimizer)
change what they claim to and nothing else, measured on real training."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from objectives import ConfigError, run_trial
from objectives.config import LoaderConfig, MemoryConfig
from objectives.knobs.loader import apply_loader
from objectives.knobs.precision import apply_precision
from objectives.sampling import ShardedEpochSampler
from objectives.timing import plan_windows
from objectives.train import train
from objectives.workload import cross_entropy

from conftest import REPO, pythonpath

SMALL = {"train": {"budget_samples": 1536}}


def trial(**sections):
    return run_trial({**SMALL, **sections})


def _params_after_one_step(batch_size: int, grad_accum: int) -> np.ndarray:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(256, 20), torch.randint(0, 5, (256,)))
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    sampler = ShardedEpochSampler(len(data), batch_size, 0, 1, seed=3)
    loader = apply_loader(LoaderConfig(), data, batch_size, sampler)
    _, precision = apply_precision("fp32", model, "cpu")
    log = train(model, optimizer, loader, sampler, 1, plan_windows(1, 0, 1), precision, torch.device("cpu"),
                cross_entropy, grad_accum=grad_accum)
    assert log.steps_done == 1
    return torch.cat([p.detach().flatten() for p in model.parameters()]).numpy()


def test_gradient_accumulation_steps_like_one_batch_of_all_its_micro_batches():
    whole = _params_after_one_step(batch_size=64, grad_accum=1)
    accumulated = _params_after_one_step(batch_size=32, grad_accum=2)
    first_half_only = _params_after_one_step(batch_size=32, grad_accum=1)
    np.testing.assert_allclose(accumulated, whole, atol=1e-6, rtol=1e-5)
    assert not np.allclose(first_half_only, whole, atol=1e-4)  # the comparison can tell them apart


def test_gradient_accumulation_counts_every_micro_batch_in_the_global_batch():
    m = trial(batch_size=32, parallel={"grad_accum": 2}).metrics
    assert m["samples_trained"] == 1536  # 24 optimizer steps x 32 x 2
    assert m["steps"] == 24
    assert m["lr_effective"] == pytest.approx(0.005)  # global batch 64 = optim.base_batch_size


def test_compile_yields_a_compiled_module_and_keeps_compile_time_out_of_throughput():
    # aot_eager traces the same graphs as Inductor without generating C++ kernels, which took 79 s here (docs/design.md)
    compiled = trial(parallel={"compile": "default", "compile_backend": "aot_eager"})
    assert compiled.outcome == "ok", compiled.reason
    m = compiled.metrics
    assert compiled.info["model_class"] == "OptimizedModule"
    step_s = m["step_time_p50_ms"] / 1000
    assert m["compile_wall_s"] > 3 * step_s  # tracing the first step costs more than several steps
    # the first step is warm-up, outside the timed windows: the slowest timed step is nowhere near it
    assert m["step_time_p95_ms"] / 1000 < m["compile_wall_s"]
    assert m["val_accuracy"] > 0.3
    assert "compile_wall_s" not in trial().metrics


def test_compile_compiles_the_training_loss_on_its_own_graph_and_trains_the_same_maths():
    """The loss outside the model's graph ran eagerly (on a GPU: fp32 logits, 58 GB instead of 45 for gpt2-small);
    compiled apart it is the same function, and a compiled trial trains to the same loss as an eager one."""
    from objectives.build import build_model
    from objectives.config import parse_config

    cfg = {**SMALL, "parallel": {"compile": "default", "compile_backend": "aot_eager"}}
    built = build_model(parse_config(cfg), torch.device("cpu"), world_size=1)
    assert built.train_loss_fn is not built.work.loss_fn
    logits, targets = torch.randn(16, 10, requires_grad=True), torch.randint(0, 10, (16,))
    torch.testing.assert_close(built.train_loss_fn(logits, targets), built.work.loss_fn(logits, targets))
    eager = build_model(parse_config(SMALL), torch.device("cpu"), world_size=1)
    assert eager.train_loss_fn is eager.work.loss_fn

    compiled, plain = run_trial(cfg).metrics, trial().metrics
    assert compiled["train_loss_final"] == pytest.approx(plain["train_loss_final"], rel=1e-3)
    assert compiled["val_loss"] == pytest.approx(plain["val_loss"], rel=1e-3)


def test_a_compiled_trial_evaluates_the_eager_model_and_compiles_nothing_for_it():
    """Evaluating the compiled module compiled it again for eval mode: for max-autotune minutes (gpt2-small, H200),
    and under DDP the other ranks wait at a collective meanwhile. The eager module shares the parameters."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = trial(parallel={"compile": "default", "compile_backend": "aot_eager"})
    assert compiled.outcome == "ok" and compiled.metrics["val_accuracy"] > 0.3
    assert counters["stats"]["unique_graphs"] == 2  # the model's training graph and the loss's; none for evaluation


def test_max_autotune_keeps_inductors_tuning_tables_off_the_trials_stderr(monkeypatch):
    """On a GPU, max-autotune wrote every tuned matmul's candidate table to stderr (selftest, the first GPU runs),
    and with the tables off a line of choice statistics per matmul (gpt2-small, H200)."""
    from torch._inductor import config, select_algorithm

    from objectives.config import ParallelConfig
    from objectives.knobs.compile import apply_compile

    monkeypatch.setattr(select_algorithm, "PRINT_AUTOTUNE", True)  # restored after the test
    monkeypatch.setattr(config, "max_autotune_report_choices_stats", True)
    apply_compile(ParallelConfig(compile="default"), nn.Linear(2, 2))
    assert select_algorithm.PRINT_AUTOTUNE and config.max_autotune_report_choices_stats
    apply_compile(ParallelConfig(compile="max-autotune", compile_backend="aot_eager"), nn.Linear(2, 2))
    assert not select_algorithm.PRINT_AUTOTUNE and not config.max_autotune_report_choices_stats


def test_compile_needs_a_warmup_step_to_keep_compilation_out_of_throughput():
    with pytest.raises(ConfigError, match="train.warmup_steps must be >= 1 with parallel.compile=default"):
        run_trial({"parallel": {"compile": "default"}, "train": {"warmup_steps": 0}})


_PEAK_MEMORY = """
import json, sys, torch
from torch import nn
from objectives.config import MemoryConfig
from objectives.knobs.memory import apply_activation_checkpointing
torch.manual_seed(0)
torch.set_num_threads(1)
blocks = [nn.Sequential(nn.Linear(1024, 1024), nn.GELU()) for _ in range(12)]
model = nn.Sequential(*blocks)
apply_activation_checkpointing(MemoryConfig(activation_checkpointing=sys.argv[1] == "on"), model, blocks)
x = torch.randn(2048, 1024)

def rss_kib(field):
    return int(next(l for l in open("/proc/self/status") if l.startswith(field)).split()[1])

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current RSS: imports peaked higher than what follows
before = rss_kib("VmRSS:")
model(x).square().mean().backward()
print(json.dumps({"peak_growth_bytes": (rss_kib("VmHWM:") - before) * 1024, "wrapped": type(model[0]).__name__}))
"""


def _peak_growth(mode: str) -> dict:
    # glibc serves freed multi-MB blocks again from its heap without returning them, so resident memory would
    # keep the high-water mark of every tensor ever freed; a fixed mmap threshold makes RSS follow live tensors.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "PYTHONPATH": pythonpath()}
    out = subprocess.run([sys.executable, "-c", _PEAK_MEMORY, mode], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_activation_checkpointing_lowers_peak_memory():
    # 12 blocks keep 2 x 8 MB (2048 x 1024 fp32) each for backward without checkpointing, 8 MB each with it
    plain, checkpointed = _peak_growth("off"), _peak_growth("on")
    assert checkpointed["wrapped"] == "CheckpointWrapper" and plain["wrapped"] == "Sequential"
    assert checkpointed["peak_growth_bytes"] < plain["peak_growth_bytes"] - 60e6, (plain, checkpointed)


def test_activation_checkpointing_and_channels_last_change_memory_not_the_maths():
    base = trial(objective={"augment": False})
    checkpointed = trial(objective={"augment": False}, memory={"activation_checkpointing": True})
    channels_last = trial(objective={"augment": False}, framework={"channels_last": True})
    for other in (checkpointed, channels_last):
        assert other.outcome == "ok" and "knobs_not_applied" not in other.info
        assert other.metrics["train_loss_final"] == pytest.approx(base.metrics["train_loss_final"], rel=1e-3)
        assert other.metrics["val_accuracy"] == pytest.approx(base.metrics["val_accuracy"], abs=0.01)


def test_a_knob_that_cannot_apply_to_the_workload_is_named():
    gpt = run_trial({"objective": {"name": "gpt", "corpus_max_bytes": 200000}, "optim": {"lr": 0.002},
                     "batch_size": 16, "train": {"budget_samples": 160}, "framework": {"channels_last": True}})
    assert gpt.outcome == "ok"
    assert gpt.info["knobs_not_applied"] == "framework.channels_last"


def test_augmentation_on_the_device_takes_it_out_of_the_input_pipeline():
    in_loader = trial()
    on_device = trial(loader={"augment_on_device": True})
    assert on_device.outcome == "ok"
    assert in_loader.metrics["data_wait_fraction"] > 0.3  # per-sample augmentation dominates a step
    assert on_device.metrics["data_wait_fraction"] < in_loader.metrics["data_wait_fraction"] / 3
    assert on_device.metrics["val_accuracy"] > 0.3  # still augmented, still learning


def test_fused_optimizer_is_used_and_learns_the_same():
    fused, plain = trial(optim={"fused": True}), trial()
    assert fused.info["optimizer_fused"] == "true" and plain.info["optimizer_fused"] == "false"
    assert fused.metrics["val_accuracy"] == pytest.approx(plain.metrics["val_accuracy"], abs=0.02)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
@pytest.mark.parametrize("section, value, fix", [
    ({"framework": {"cudnn_benchmark": True}}, "framework.cudnn_benchmark", "framework.cudnn_benchmark=false"),
    ({"memory": {"expandable_segments": True}}, "memory.expandable_segments", "memory.expandable_segments=false"),
    ({"model_pruning": {"method": "2:4", "ratio": 0.5}, "precision": "bf16"}, "model_pruning.method=2:4",
     "model_pruning.method=structured"),
])
def test_gpu_only_switches_are_config_errors_on_cpu(section, value, fix):
    with pytest.raises(ConfigError) as err:
        run_trial(section)
    assert "\n" not in str(err.value) and value in str(err.value) and f"fix: {fix}" in str(err.value)


def test_two_four_sparsity_is_exactly_half():
    with pytest.raises(ConfigError, match="model_pruning.ratio must be 0 or 0.5 with model_pruning.method=2:4"):
        run_trial({"model_pruning": {"method": "2:4", "ratio": 0.25}})


def test_memory_section_rejects_unknown_keys():
    with pytest.raises(ConfigError, match="memory has unknown key 'checkpointing'"):
        run_trial({"memory": {"checkpointing": True}})
    assert MemoryConfig().activation_checkpointing is False

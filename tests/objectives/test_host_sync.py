"""No host read of a training tensor between timing-window edges.

A host read (``Tensor.item``, ``float(t)``, ``.cpu()``, ...) of a GPU tensor
waits for the device: one per step ends CPU/GPU overlap and, under DDP, adds
an all-reduce per step. The loop may read the loss only at window edges
(and at the evaluation pauses, which lie outside the windows). There is no
GPU here, so these tests count the Python-level reads on the CPU, where the
loop runs the same code: torch.Tensor's read methods are wrapped to count
calls, the model's forward pre-hook and the optimizer's step post-hook
(both real torch hooks) say which step the loop is in.
"""
from __future__ import annotations

import contextlib
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from objectives.config import LoaderConfig, ParallelConfig
from objectives.knobs.loader import apply_loader
from objectives.knobs.parallel import apply_ddp, init_process_group
from objectives.knobs.precision import apply_precision
from objectives.launch import run_ranks
from objectives.sampling import ShardedEpochSampler
from objectives.time_to_accuracy import TargetAccuracy
from objectives.timing import WindowPlan, plan_windows
from objectives.train import train
from objectives.workload import cross_entropy

HOST_READS = ("item", "__float__", "__int__", "__bool__", "tolist", "cpu", "numpy")
STEPS, WARMUP, WINDOW = 12, 2, 3  # 3 windows of 3 steps after 2 warm-up steps
EVAL_PAUSE_S = 0.5


@dataclass
class ReadLog:
    """Host reads by where the loop was: inside step k, or after step k before step k+1 began."""

    inside_step: Counter = field(default_factory=Counter)
    after_step: Counter = field(default_factory=Counter)
    step: int = 0
    in_step: bool = False


def edges(plan: WindowPlan, steps: int) -> set[int]:
    """Steps after which the loop may read: the first, the windows' edges, the last."""
    window_edges = {plan.warmup_steps + i * plan.window_steps for i in range(steps)}
    return {1, steps} | {s for s in window_edges if 0 < s <= steps}


def _host_tensor_by_design(tensor: torch.Tensor, caller: Any, optimizer: torch.optim.Optimizer) -> bool:
    """Reads that stay host reads on a GPU: the loader and the sampler work on host tensors before the batch
    moves to the device (the epoch's permutation, the workers' base seed), and AdamW keeps its step count in
    a host tensor unless fused or capturable (torch/optim/adam.py, _init_group)."""
    module = caller.f_globals.get("__name__", "")
    if module.startswith("torch.utils.data") or module == "objectives.sampling":
        return True
    return any(tensor is state.get("step") for state in optimizer.state.values())


@contextlib.contextmanager
def counting_host_reads(model: nn.Module, optimizer: torch.optim.Optimizer):
    log = ReadLog()
    saved = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def counted(name):
        original = saved[name]

        def read(self, *args, **kwargs):
            if not _host_tensor_by_design(self, sys._getframe(1), optimizer):
                (log.inside_step if log.in_step else log.after_step)[log.step] += 1
            return original(self, *args, **kwargs)
        return read

    def step_begins(module, args):
        log.in_step = log.in_step or torch.is_grad_enabled()  # an evaluation's forward is no training step

    def step_ends(opt, args, kwargs):
        log.in_step = False
        log.step += 1

    hooks = [model.register_forward_pre_hook(step_begins), optimizer.register_step_post_hook(step_ends)]
    for name in HOST_READS:
        setattr(torch.Tensor, name, counted(name))
    try:
        yield log
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)
        for hook in hooks:
            hook.remove()


def train_counting(rank: int = 0, world_size: int = 1, port: int = 0, with_target: bool = False) -> dict:
    """Train a small model for STEPS steps while counting host reads; violations raise on any rank."""
    if world_size > 1:
        init_process_group(rank, world_size, port)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(512, 20), torch.randint(0, 5, (512,)))
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    model = apply_ddp(ParallelConfig(devices=world_size), model, torch.device("cpu"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sampler = ShardedEpochSampler(len(data), 16, rank, world_size, seed=3)
    loader = apply_loader(LoaderConfig(), data, 16, sampler)
    _, precision = apply_precision("fp32", model, "cpu")
    plan = plan_windows(STEPS, WARMUP, WINDOW)
    target = None
    if with_target:  # evaluations every 4 steps, never reached: they are pauses, outside the windows
        def evaluate() -> dict[str, float]:
            time.sleep(EVAL_PAUSE_S)
            with torch.no_grad():
                hits = model(data.tensors[0][:64]).argmax(-1).eq(data.tensors[1][:64])
                return {"val_accuracy": float(hits.float().mean())}
        target = TargetAccuracy(2.0, 4, evaluate)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two OpenMP threads on a loaded two-core machine crawl
    with counting_host_reads(model, optimizer) as reads:
        log = train(model, optimizer, loader, sampler, STEPS, plan, precision, torch.device("cpu"), cross_entropy,
                    target=target, grad_accum=2)
    torch.set_num_threads(threads)
    allowed = edges(plan, STEPS) | ({4, 8, 12} if with_target else set())
    between_edges = {k: n for k, n in reads.after_step.items() if k not in allowed}
    assert log.steps_done == STEPS and reads.step == STEPS
    assert not reads.inside_step, f"rank {rank}: host reads inside steps {dict(reads.inside_step)}"
    assert not between_edges, f"rank {rank}: host reads after steps that are not window edges {between_edges}"
    return {"at_edges": sum(reads.after_step.values()), "log": log, "plan": plan}


def test_one_rank_reads_the_loss_only_at_window_edges():
    out = train_counting()
    assert out["at_edges"] > 0  # the counter sees the reads the loop does make
    log, plan = out["log"], out["plan"]
    assert plan == WindowPlan(WARMUP, WINDOW, 3)
    assert [(s.first_step, s.last_step) for s in log.spans] == [(1, 1), (2, 2), (3, 5), (6, 8), (9, 11), (12, 12)]


def test_evaluation_pauses_read_on_the_host_but_stay_out_of_the_windows():
    out = train_counting(with_target=True)
    log = out["log"]
    # steps 4 and 8 evaluate mid-window: the windows 3-5 and 6-8 are split around the pause
    assert [(s.first_step, s.last_step) for s in log.spans] == [
        (1, 1), (2, 2), (3, 4), (5, 5), (6, 8), (9, 11), (12, 12)]
    before, after = log.spans[2], log.spans[3]
    assert after.start_unix_s - before.end_unix_s >= EVAL_PAUSE_S
    window_wall_s = after.end_unix_s - before.start_unix_s  # the pause included
    assert before.seconds + after.seconds <= window_wall_s - EVAL_PAUSE_S + 0.01  # the window's time leaves it out


def test_two_ddp_ranks_read_only_at_window_edges():
    out = run_ranks(train_counting, 2, 1, ())
    assert out["at_edges"] > 0 and out["log"].steps_done == STEPS


def trained_with_accumulation(device: str, stable: bool, compile_mode: str = "none") -> list[torch.Tensor]:
    """A small MLP's weights after 6 steps of 2 micro-batches each, in fp32, compiled as a trial compiles it
    (objectives/knobs/compile.py: the model in ``compile_mode``, the loss apart)."""
    from objectives.knobs.compile import apply_compile, apply_compile_loss

    torch._dynamo.reset()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(256, 20), torch.randint(0, 5, (256,)))
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sampler = ShardedEpochSampler(len(data), 16, 0, 1, seed=3)
    _, precision = apply_precision("fp32", model, device)
    parallel = ParallelConfig(compile=compile_mode, grad_accum=2)
    compiled, loss_fn = apply_compile(parallel, model), apply_compile_loss(parallel, cross_entropy)
    train(compiled, optimizer, apply_loader(LoaderConfig(), data, 16, sampler), sampler, 6, plan_windows(6, 1, 2),
          precision, torch.device(device), loss_fn, grad_accum=2, stable_grads=stable)
    return [p.detach().cpu().clone() for p in model.parameters()]


def test_stable_gradient_buffers_train_the_same_model():
    """Gradient accumulation through CUDA graphs (compile reduce-overhead or max-autotune) keeps `.grad` in
    buffers allocated outside the graphs, zeroed in place (objectives/train.py `stable_grads`); no graph runs on
    a CPU, so here the two ways must simply train the same weights."""
    from objectives.knobs.compile import needs_stable_grads

    trained = lambda stable: trained_with_accumulation("cpu", stable)  # noqa: E731
    assert all(torch.equal(a, b) for a, b in zip(trained(False), trained(True)))
    assert needs_stable_grads(ParallelConfig(compile="reduce-overhead", grad_accum=2), "cuda")
    assert needs_stable_grads(ParallelConfig(compile="max-autotune", grad_accum=4), "cuda")
    assert not needs_stable_grads(ParallelConfig(compile="max-autotune", grad_accum=1), "cuda")
    assert not needs_stable_grads(ParallelConfig(compile="default", grad_accum=2), "cuda")
    assert not needs_stable_grads(ParallelConfig(compile="reduce-overhead", grad_accum=2), "cpu")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("compile_mode", ["reduce-overhead", "max-autotune"])
def test_gradient_accumulation_through_cuda_graphs_trains_like_eager(compile_mode):
    """The CUDA-graph compile modes with 2 micro-batches a step, as a trial runs them (`stable_grads` from
    needs_stable_grads), train the weights eager training does, within fp32 rounding (TF32 off: precision fp32)."""
    from objectives.knobs.compile import needs_stable_grads

    eager = trained_with_accumulation("cuda", stable=False)
    stable = needs_stable_grads(ParallelConfig(compile=compile_mode, grad_accum=2), "cuda")
    graphed = trained_with_accumulation("cuda", stable, compile_mode)
    for a, b in zip(eager, graphed):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)

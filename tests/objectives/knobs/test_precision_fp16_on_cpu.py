"""fp16 with GradScaler through the real training loop, on a CPU.

A trial refuses fp16 without CUDA (objectives/knobs/precision.py), so the
self-test cannot run it here; but torch runs fp16 autocast and GradScaler
on a CPU, and the loop (objectives/train.py) is the same code on either
device. These tests hand the loop the plan apply_precision builds on a GPU,
with the CPU's scaler, so the loop's loss scaling logic runs, not only its
import: an overflowing scale must skip steps and back off instead of
writing inf into the weights.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from objectives.knobs.precision import PrecisionPlan
from objectives.sampling import ShardedEpochSampler
from objectives.timing import WindowPlan
from objectives.train import train

BATCH = 16


def fp16_plan(init_scale: float) -> PrecisionPlan:
    """What apply_precision returns for fp16 on a GPU, with the scaler on this CPU."""
    return PrecisionPlan("fp16", "cpu", torch.float16, torch.amp.GradScaler("cpu", init_scale=init_scale))


def train_steps(plan: PrecisionPlan, steps: int) -> tuple[nn.Module, nn.Module, object]:
    torch.manual_seed(0)
    x, y = torch.randn(256, 32), torch.randint(0, 4, (256,))
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    before = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    before.load_state_dict(model.state_dict())
    sampler = ShardedEpochSampler(len(x), BATCH, 0, 1, 0)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH, sampler=sampler, drop_last=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    log = train(model, optimizer, loader, sampler, steps, WindowPlan(1, 2, (steps - 1) // 2), plan,
                torch.device("cpu"), nn.functional.cross_entropy)
    return model, before, log


def test_fp16_autocast_and_grad_scaler_train_on_the_cpu() -> None:
    plan = fp16_plan(init_scale=2.0**8)
    model, before, log = train_steps(plan, steps=9)
    assert log.steps_done == 9 and log.logits_dtype == "torch.float16"
    assert math.isfinite(log.train_loss_final)
    assert plan.grad_scaler.get_scale() == 2.0**8  # no overflow at this scale: nothing skipped, no growth yet
    assert not torch.equal(model[0].weight, before[0].weight)


def test_an_overflowing_scale_skips_steps_and_backs_off_instead_of_writing_inf_into_the_weights() -> None:
    plan = fp16_plan(init_scale=2.0**40)  # the scaled fp16 gradients overflow until the scale halves ~25 times
    model, before, log = train_steps(plan, steps=3)
    assert log.steps_done == 3 and math.isfinite(log.train_loss_final)  # the loss itself never overflowed
    assert plan.grad_scaler.get_scale() == 2.0**37  # three skipped steps, each halving the scale
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), before.parameters()))  # every step skipped
    plan = fp16_plan(init_scale=2.0**40)
    model, before, log = train_steps(plan, steps=40)
    assert plan.grad_scaler.get_scale() < 2.0**20  # backed off to a scale whose gradients fit in fp16
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert not torch.equal(model[0].weight, before[0].weight)  # and then trained

"""The timed training loop and the evaluation.

The loop runs a fixed number of steps (the sample budget divided by the
global batch), restarting the loader at epoch ends, reading the loss back
every step so a non-finite loss stops training at once. Timing covers the
whole iteration, loader included; see timing.py for how it becomes
throughput. With a time-to-accuracy target the loop also pauses to
evaluate (time_to_accuracy.py), and so does early stopping's learning curve
(early_stop.py); those pauses are kept out of the step times.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from objectives import measure
from objectives.early_stop import EarlyStop
from objectives.knobs.parallel import global_mean
from objectives.knobs.precision import PrecisionPlan
from objectives.sampling import ShardedEpochSampler
from objectives.time_to_accuracy import TargetAccuracy
from objectives.timing import WindowPlan
from objectives.workload import LossFn


@dataclass
class TrainLog:
    steps_done: int = 0
    step_times_s: list[float] = field(default_factory=list)
    data_wait_s: list[float] = field(default_factory=list)  # per step: waiting for the next batch
    timed_start_unix_s: float = 0.0  # wall clock of the timed windows, for the GPU telemetry window
    timed_end_unix_s: float = 0.0
    train_loss_final: float = float("nan")
    logits_dtype: str = ""
    loader_worker_processes: int = 0
    train_wall_s: float = 0.0
    diverged_at_step: int | None = None
    stopped_at_target: bool = False
    stopped_early: bool = False


def _is_window_edge(step: int, plan: WindowPlan) -> bool:
    done = step + 1
    return done == 1 or (done >= plan.warmup_steps and (done - plan.warmup_steps) % plan.window_steps == 0)


def train(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: DataLoader,
    sampler: ShardedEpochSampler,
    steps: int,
    plan: WindowPlan,
    precision: PrecisionPlan,
    device: torch.device,
    loss_fn: LossFn,
    target: TargetAccuracy | None = None,
    grad_accum: int = 1,
    prepare_input: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
    early_stop: EarlyStop | None = None,
) -> TrainLog:
    """``steps`` optimizer steps of ``grad_accum`` micro-batches each.

    Gradients of the micro-batches add up (each loss divided by
    ``grad_accum``), so one step equals a step on their concatenation; under
    DDP only the last micro-batch all-reduces. ``prepare_input`` runs on each
    input batch on the device (augmentation moved there, channels_last).
    """
    log = TrainLog()
    baseline_children = measure.child_pids()
    model.train()
    epoch = 0
    batches = iter(loader)
    start = last = time.perf_counter()
    log.timed_start_unix_s = time.time()  # moved to the end of warm-up when there is one
    wait_s = 0.0
    while log.steps_done < steps:
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=device)
        for micro in range(grad_accum):
            asked = time.perf_counter()
            while (batch := next(batches, None)) is None:  # epoch end: reshuffle and restart
                epoch += 1
                sampler.set_epoch(epoch)
                batches = iter(loader)
            wait_s += time.perf_counter() - asked
            x, y = batch
            x, y = prepare_input(x.to(device, non_blocking=True)), y.to(device, non_blocking=True)
            sync = micro == grad_accum - 1 or not isinstance(model, DistributedDataParallel)
            with contextlib.nullcontext() if sync else model.no_sync():
                with precision.autocast():
                    logits = model(x)
                    loss = loss_fn(logits, y) / grad_accum
                if precision.grad_scaler is not None:
                    precision.grad_scaler.scale(loss).backward()
                else:
                    loss.backward()
            loss_sum += loss.detach().float()
        if not log.logits_dtype:
            log.logits_dtype = str(logits.dtype)
        if precision.grad_scaler is not None:
            precision.grad_scaler.step(optimizer)
            precision.grad_scaler.update()
        else:
            optimizer.step()
        loss_value = float(global_mean(loss_sum))
        now = time.perf_counter()
        log.step_times_s.append(now - last)
        log.data_wait_s.append(wait_s)
        wait_s = 0.0
        log.steps_done += 1
        if log.steps_done == plan.warmup_steps:
            log.timed_start_unix_s = time.time()
        if log.steps_done == plan.warmup_steps + plan.windows * plan.window_steps:
            log.timed_end_unix_s = time.time()
        log.train_loss_final = loss_value
        if not math.isfinite(loss_value):
            log.diverged_at_step = log.steps_done
            break
        if _is_window_edge(log.steps_done - 1, plan):
            # Counting processes is measurement, not training: keep it out of the step time.
            workers = measure.new_child_processes(baseline_children)
            log.loader_worker_processes = max(log.loader_worker_processes, workers)
            now = time.perf_counter()
        if target is not None and target.due(log.steps_done, steps):
            if target.reached(start):
                log.stopped_at_target = True
                break
            now = time.perf_counter()
        if early_stop is not None and early_stop.should_stop(log.steps_done, steps, log.step_times_s):
            log.stopped_early = True
            break
        if early_stop is not None and early_stop.curve:
            now = time.perf_counter()  # an evaluation is not training time
        last = now
    del batches
    log.train_wall_s = time.perf_counter() - start
    return log


@torch.no_grad()
def evaluate(
    model: nn.Module, loader: DataLoader, precision: PrecisionPlan, device: torch.device, loss_fn: LossFn
) -> dict[str, float]:
    """Mean loss over every target of the validation split, and accuracy when targets are class indices.

    Works for (N, C) logits with (N,) targets and for (N, T, C) sequences with
    (N, T) targets alike: accuracy is argmax over the last dimension.
    """
    model.eval()
    correct, loss_sum, seen, classifies = 0, 0.0, 0, True
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with precision.autocast():
            logits = model(x)
        logits = logits.float()
        loss_sum += float(loss_fn(logits, y)) * y.numel()
        seen += y.numel()
        classifies = classifies and not y.is_floating_point() and logits.shape[:-1] == y.shape
        if classifies:
            correct += int((logits.argmax(dim=-1) == y).sum())
    model.train()
    out = {"val_loss": loss_sum / seen}
    if classifies:
        out["val_accuracy"] = correct / seen
    return out

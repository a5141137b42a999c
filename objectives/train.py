"""The timed training loop and the evaluation.

The loop runs a fixed number of steps (the sample budget divided by the
global batch), restarting the loader at epoch ends. It never reads a
training tensor on the host inside a timing window: the loss stays on the
device, summed per span, and is read back (one all-reduce under DDP, one
host read) only at a span's end, just after the device synchronize that
precedes the clock read; a non-finite loss then stops training, reported as
"within steps a-b" (the steps since the previous read). Spans end at the
window edges of timing.py and before every evaluation pause (time to
accuracy, time_to_accuracy.py; early stopping's learning curve,
early_stop.py), so evaluations stay out of the windows and out of the
wall-clock intervals the GPU energy is integrated over.

Left alone here: with fp16 and a non-fused optimizer, GradScaler.step reads
its inf check on the host every step (torch/amp/grad_scaler.py,
_maybe_opt_step); ``optim.fused=true`` lets the fused AdamW take the check
on the device instead.
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
from objectives.in_trial_stopping import EarlyStop
from objectives.knobs.parallel import global_mean
from objectives.knobs.precision import PrecisionPlan
from objectives.sampling import ShardedEpochSampler
from objectives.time_to_accuracy import TargetAccuracy
from objectives.timing import Span, WindowPlan
from objectives.workload import LossFn, is_probabilities


@dataclass
class TrainLog:
    steps_done: int = 0
    spans: list[Span] = field(default_factory=list)  # the steps between synchronised clock reads, in order
    train_loss_final: float = float("nan")  # the last step's loss, mean over ranks
    logits_dtype: str = ""
    loader_worker_processes: int = 0
    train_wall_s: float = 0.0
    diverged_within_steps: tuple[int, int] | None = None  # a non-finite loss somewhere in these steps
    stopped_at_target: bool = False
    stopped_early: bool = False
    untimed_restart_s: float | None = None  # a loader restart timed after the last step, when no epoch ended


def is_window_edge(steps_done: int, plan: WindowPlan) -> bool:
    """After the first step (it compiles), at the end of warm-up and at every window's end."""
    after_warmup = steps_done - plan.warmup_steps
    return steps_done == 1 or (after_warmup >= 0 and after_warmup % plan.window_steps == 0)


def synchronized_clock(device: torch.device) -> tuple[float, float]:
    """(perf_counter, time.time) once the device has run everything queued so far.

    torch.cuda.synchronize waits for every stream of the device, NCCL's
    gradient all-reduce included (torch/cuda/__init__.py); a CPU runs
    synchronously."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter(), time.time()


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
    stable_grads: bool = False,
) -> TrainLog:
    """``steps`` optimizer steps of ``grad_accum`` micro-batches each.

    Gradients of the micro-batches add up (each loss divided by
    ``grad_accum``), so one step equals a step on their concatenation; under
    DDP only the last micro-batch all-reduces. ``prepare_input`` runs on each
    input batch on the device (augmentation moved there, channels_last).

    ``stable_grads``: the ``.grad`` buffers are allocated here, zeroed, before
    the first step, and zeroed in place between steps instead of freed. A model
    compiled with CUDA graphs (objectives/knobs/compile.py) would otherwise get
    its first micro-batch's gradients as ``.grad`` in the graphs' own memory,
    which its next micro-batch's run overwrites: torch raises "accessing
    gradient tensor output of CUDAGraphs that has been overwritten", and
    advises exactly these buffers (torch/_inductor/cudagraph_trees.py).
    """
    if stable_grads:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
    log = TrainLog()
    baseline_children = measure.child_pids()
    model.train()
    epoch = 0
    batches = iter(loader)
    span_start, span_start_unix = synchronized_clock(device)
    train_start = span_start
    span_loss = torch.zeros((), dtype=torch.float64, device=device)  # float64: a sum of finite losses stays finite
    wait_s = restart_s = 0.0
    restarts = 0
    while log.steps_done < steps:
        optimizer.zero_grad(set_to_none=not stable_grads)
        loss_sum = torch.zeros((), device=device)
        for micro in range(grad_accum):
            asked, restarted = time.perf_counter(), False
            while (batch := next(batches, None)) is None:  # epoch end: reshuffle and restart
                epoch += 1
                sampler.set_epoch(epoch)
                batches, restarted = iter(loader), True
            waited = time.perf_counter() - asked
            wait_s += waited
            if restarted:
                restart_s, restarts = restart_s + waited, restarts + 1
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
        span_loss += loss_sum
        log.steps_done += 1
        done = log.steps_done
        pause = (target is not None and target.due(done, steps)) or (
            early_stop is not None and early_stop.due(done, steps))
        if not (pause or done == steps or is_window_edge(done, plan)):
            continue

        span_end, span_end_unix = synchronized_clock(device)
        first = log.spans[-1].last_step + 1 if log.spans else 1
        log.spans.append(Span(first, done, span_end - span_start, span_start_unix, span_end_unix, wait_s,
                              restart_s, restarts))
        wait_s = restart_s = 0.0
        restarts = 0
        span_loss_sum, log.train_loss_final = global_mean(torch.stack([span_loss, loss_sum.double()])).tolist()
        span_loss.zero_()
        if not math.isfinite(span_loss_sum):
            log.diverged_within_steps = (first, done)
            break
        workers = measure.new_child_processes(baseline_children)
        log.loader_worker_processes = max(log.loader_worker_processes, workers)
        if target is not None and target.due(done, steps) and target.reached(train_start):
            log.stopped_at_target = True
            break
        if early_stop is not None and early_stop.should_stop(done, steps, log.spans):
            log.stopped_early = True
            break
        span_start, span_start_unix = synchronized_clock(device)
    log.train_wall_s = time.perf_counter() - train_start
    del batches
    if log.spans and not log.stopped_early and not any(s.restarts for s in log.spans):
        # No epoch ended: one restart is timed here, outside the timed steps (a new epoch's iterator, its
        # workers' start, its first batch), and charged per epoch like those a longer run times
        # (objectives/timing.py). The old iterator's shutdown is left out: mid-epoch, with batches in
        # flight, it costs more than an epoch end's. A trial early stopping ended keeps its probe's figure,
        # which was judged before any such restart could be timed.
        sampler.set_epoch(epoch + 1)
        start = time.perf_counter()
        next(iter(loader), None)
        log.untimed_restart_s = time.perf_counter() - start
    return log


@torch.no_grad()
def evaluate(
    model: nn.Module, loader: DataLoader, precision: PrecisionPlan, device: torch.device, loss_fn: LossFn
) -> dict[str, float]:
    """Mean loss over every target of the validation split, and accuracy when targets are classes.

    Works for (N, C) logits with (N,) targets and for (N, T, C) sequences with
    (N, T) targets alike: accuracy is argmax over the last dimension. Class
    probabilities of the logits' shape (soft labels, one-hot) count as their
    argmax class, one target per row.
    """
    model.eval()
    correct, loss_sum, seen, classifies = 0, 0.0, 0, True
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        try:
            with precision.autocast():
                logits = model(x)
        except (MemoryError, torch.cuda.OutOfMemoryError):  # an outcome of its own (oom), as it is
            raise
        except Exception as err:  # noqa: BLE001 - the user's forward; say which batch it was given
            raise RuntimeError(
                f"evaluating on the validation set in batches of {loader.batch_size} (train.eval_batch_size) failed "
                f"on a batch of {len(x)} samples ({type(err).__name__}: {' '.join(str(err).split())[:200]}); fix: "
                f"a train.eval_batch_size and a validation set size the model's forward takes"
            ) from err
        logits = logits.float()
        if is_probabilities(logits, y):
            y_class = y.argmax(dim=-1)
        else:
            y_class = None if y.is_floating_point() else y
        count = y.numel() if y_class is None else y_class.numel()
        loss_sum += float(loss_fn(logits, y)) * count
        seen += count
        classifies = classifies and y_class is not None and logits.shape[:-1] == y_class.shape
        if classifies:
            correct += int((logits.argmax(dim=-1) == y_class).sum())
    model.train()
    out = {"val_loss": loss_sum / seen}
    if classifies:
        out["val_accuracy"] = correct / seen
    return out

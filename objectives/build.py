"""The builds a trial runs before its loop: the model with every knob applied, and the loader.

Both are used by run_trial (objectives/run.py) and by the DDP gradient check
(objectives/grad_agreement.py), so that check runs the real build. The
knobs are applied in ``objectives.knobs.RUN_ORDER``; why each sits where it
does is said there and in the comments below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader

from objectives.config import TrialConfig
from objectives.knobs.batch_size import apply_lr_scaling, global_batch_size
from objectives.knobs.compile import apply_compile, apply_compile_loss
from objectives.knobs.framework import apply_framework, channels_last_skip_reason, input_format
from objectives.knobs.loader import apply_loader, device_augment_skip_reason
from objectives.knobs.memory import apply_activation_checkpointing, checkpointing_skip_reason
from objectives.knobs.model_pruning import layers_kept, model_pruning_skip_reason, prune_and_count
from objectives.knobs.optimizer import build_optimizer
from objectives.knobs.parallel import apply_ddp
from objectives.knobs.precision import PrecisionPlan, apply_precision
from objectives.sampling import ShardedEpochSampler
from objectives.workload import LossFn, Workload
from objectives.workloads import build_workload


@dataclass
class BuiltModel:
    work: Workload
    model: nn.Module  # every model knob applied (DDP-wrapped with more than one rank)
    precision: PrecisionPlan
    optimizer: torch.optim.Optimizer
    lr: float  # after the batch-size rule
    global_batch: int  # samples per optimizer step over ranks and micro-batches
    metrics: dict[str, float]  # parameter and FLOP counts, fp8 and 2:4 layer counts
    not_applied: dict[str, str]  # knob -> why it cannot apply to this workload
    semi_sparse_layers: list[str]
    train_loss_fn: LossFn  # the workload's loss, compiled with parallel.compile (evaluation keeps work.loss_fn)


@dataclass
class BuiltLoader:
    loader: DataLoader
    sampler: ShardedEpochSampler
    prepare_input: Callable[[torch.Tensor], torch.Tensor]  # what the loop does to a batch on the device


def knobs_not_applied(cfg: TrialConfig, work: Workload) -> dict[str, str]:
    """Knob -> why it cannot apply to this workload, decided before training starts."""
    reasons = {}
    model_pruning = model_pruning_skip_reason(cfg.model_pruning, work.model, layers_kept(cfg.model_pruning, work))
    if model_pruning:
        reasons["model_pruning"] = model_pruning
    if cfg.train.target_val_accuracy is not None and not measures_accuracy(cfg, work):
        reasons["train.target_val_accuracy"] = f"objective {cfg.objective.name} measures no accuracy"
    for knob, reason in (
        ("memory.activation_checkpointing", checkpointing_skip_reason(cfg.memory, work.checkpoint_blocks)),
        ("framework.channels_last", channels_last_skip_reason(cfg.framework, work.example_input)),
        ("loader.augment_on_device", device_augment_skip_reason(cfg.loader, work.device_augment)),
    ):
        if reason:
            reasons[knob] = reason
    return reasons


def measures_accuracy(cfg: TrialConfig, work: Workload) -> bool:
    return work.val_set is not None and bool(cfg.objective.measures_accuracy)


def build_model(cfg: TrialConfig, device: torch.device, world_size: int) -> BuiltModel:
    """The workload's model with every model knob applied, and its optimizer; the same weights on every rank."""
    torch.manual_seed(cfg.train.seed)  # identical initial weights on every rank
    work = build_workload(cfg.objective, cfg.train.eval_batch_size)
    not_applied = knobs_not_applied(cfg, work)
    # model pruning on the plain module: torch-pruning traces the graph and replaces layers
    pruned = prune_and_count(cfg.model_pruning, work, applies="model_pruning" not in not_applied,
                             batch_size=cfg.batch_size)
    model, metrics = pruned.model, pruned.metrics
    if pruned.not_applied:
        not_applied["model_pruning"] = pruned.not_applied
    if work.model_flops_per_token is not None:
        metrics["model_flops_per_token"] = work.model_flops_per_token(model)
    model, precision = apply_precision(cfg.precision, model.to(device), device.type)  # fp8 swaps Linear modules
    if cfg.precision == "fp8":
        metrics["fp8_converted_layers"] = len(precision.fp8_converted_layers)
    model = apply_activation_checkpointing(cfg.memory, model, work.checkpoint_blocks)  # wraps the final blocks
    channels_last = "framework.channels_last" not in not_applied
    model = apply_framework(cfg.framework, model, device.type, channels_last)  # the format compile will see
    model = apply_compile(cfg.parallel, model)  # before DDP, so DDP's hooks see the compiled parameters
    train_loss_fn = apply_compile_loss(cfg.parallel, work.loss_fn)
    model = apply_ddp(cfg.parallel, model, device)
    global_batch = global_batch_size(cfg.batch_size, world_size, cfg.parallel.grad_accum)
    lr = apply_lr_scaling(cfg.optim, global_batch)
    optimizer = build_optimizer(cfg.optim, model.parameters(), lr)  # last: it holds the final parameters
    return BuiltModel(work, model, precision, optimizer, lr, global_batch, metrics, not_applied,
                      pruned.semi_sparse_layers, train_loss_fn)


def build_loader(cfg: TrialConfig, built: BuiltModel, rank: int, world_size: int) -> BuiltLoader:
    """This rank's shard of the training set, with its own augmentation stream."""
    work = built.work
    torch.manual_seed(cfg.train.seed + 7919 * (rank + 1))  # different augmentation per rank
    channels_last = "framework.channels_last" not in built.not_applied
    train_set, prepare_input = work.train_set, input_format(cfg.framework, channels_last)
    if cfg.loader.augment_on_device and "loader.augment_on_device" not in built.not_applied:
        train_set, to_format, augment = work.device_augment_train_set, prepare_input, work.device_augment
        prepare_input = lambda x: to_format(augment(x))  # noqa: E731
    sampler = ShardedEpochSampler(len(train_set), cfg.batch_size, rank, world_size, cfg.train.seed)
    if callable(getattr(train_set, "follow", None)):  # randomness per sample, whatever the workers (digits)
        train_set.follow(sampler)
    return BuiltLoader(apply_loader(cfg.loader, train_set, cfg.batch_size, sampler), sampler, prepare_input)

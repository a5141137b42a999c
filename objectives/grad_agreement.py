"""Gradients after one step, on one rank or split over DDP ranks: the DDP correctness probe.

k ranks each given a contiguous 1/k of ``sample_indices`` must produce the
same averaged gradients as one rank given all of them. Tests call this with
augmentation off; it builds the model exactly as run_trial does (same seed,
model pruning, precision, DDP wrap), so it checks the real code path.
"""

from __future__ import annotations

import numpy as np
import torch

from objectives.config import TrialConfig, parse_config
from objectives.knobs.model_pruning import apply_model_pruning, layers_kept
from objectives.knobs.parallel import (
    apply_ddp,
    apply_threads,
    check_parallel,
    device_for_rank,
    init_process_group,
    unwrap,
)
from objectives.knobs.precision import apply_precision
from objectives.launch import run_ranks
from objectives.workloads import build_workload


def flat_grads_after_one_step(cfg: dict, sample_indices: list[int]) -> np.ndarray:
    """Flattened gradients (rank 0's, after DDP's all-reduce) of the mean loss over ``sample_indices``."""
    trial = parse_config(cfg)
    check_parallel(trial.parallel)
    world_size = trial.parallel.devices
    if len(sample_indices) % world_size:
        raise ValueError(f"{len(sample_indices)} samples do not split evenly over {world_size} ranks")
    if world_size == 1:
        return _grads_on_rank(0, 1, 0, trial, list(sample_indices))
    return run_ranks(_grads_on_rank, world_size, trial.parallel.threads, (trial, list(sample_indices)))


def _grads_on_rank(rank: int, world_size: int, port: int, cfg: TrialConfig, sample_indices: list[int]) -> np.ndarray:
    apply_threads(cfg.parallel)
    device = device_for_rank(rank)
    if world_size > 1:
        init_process_group(rank, world_size, port)
    torch.manual_seed(cfg.train.seed)
    work = build_workload(cfg.objective, cfg.train.eval_batch_size)
    train_set = work.train_set
    model = apply_model_pruning(cfg.model_pruning, work.model, work.example_input, layers_kept(cfg.model_pruning, work))
    model, precision = apply_precision(cfg.precision, model.to(device), device.type)
    model = apply_ddp(cfg.parallel, model, device)
    share = len(sample_indices) // world_size
    mine = sample_indices[rank * share : (rank + 1) * share]
    x = torch.stack([train_set[i][0] for i in mine]).to(device)
    y = torch.stack([train_set[i][1] for i in mine]).to(device)
    model.train()
    with precision.autocast():
        loss = work.loss_fn(model(x), y)
    loss.backward()
    grads = [p.grad.detach().flatten().float().cpu() for p in unwrap(model).parameters()]
    return torch.cat(grads).numpy()

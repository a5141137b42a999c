"""Gradients after one step, on one rank or split over DDP ranks: the DDP correctness probe.

k ranks each given a contiguous 1/k of ``sample_indices`` must produce the
same averaged gradients as one rank given all of them. Tests call this with
augmentation off; the model is run_trial's own build (objectives/build.py:
same seed, model pruning, precision, checkpointing, compile, DDP wrap), so it
checks the real code path.
"""

from __future__ import annotations

import numpy as np
import torch

from objectives.build import build_model
from objectives.config import TrialConfig, parse_config
from objectives.hardware import from_torch
from objectives.knobs import check_hardware
from objectives.knobs.parallel import apply_threads, device_for_rank, init_process_group, unwrap
from objectives.launch import run_ranks


def flat_grads_after_one_step(cfg: dict, sample_indices: list[int]) -> np.ndarray:
    """Flattened gradients (rank 0's, after DDP's all-reduce) of the mean loss over ``sample_indices``."""
    trial = parse_config(cfg)
    check_hardware(trial, from_torch())
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
    built = build_model(cfg, device, world_size)
    share = len(sample_indices) // world_size
    mine = sample_indices[rank * share : (rank + 1) * share]
    train_set = built.work.train_set
    x = torch.stack([train_set[i][0] for i in mine]).to(device)
    y = torch.stack([train_set[i][1] for i in mine]).to(device)
    built.model.train()
    with built.precision.autocast():
        loss = built.work.loss_fn(built.model(x), y)
    loss.backward()
    grads = [p.grad.detach().flatten().float().cpu() for p in unwrap(built.model).parameters()]
    return torch.cat(grads).numpy()

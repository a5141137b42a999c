"""What one run path needs from a workload, whatever it trains.

digits, gpt, resnet and the user's own ``_target_`` objective each build
one of these records; run.py then applies every knob the same way. A
workload is data, not a subclass: datasets, the model, one example input,
the loss, which layers model pruning must leave alone, which blocks
activation checkpointing wraps, how to augment a batch on the device, and
the extra metrics only it can state (tokens per sample, model FLOPs per
token).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def is_probabilities(logits: torch.Tensor, targets: torch.Tensor) -> bool:
    """Soft-label or one-hot targets: floats of the logits' own shape, a probability per class."""
    return targets.is_floating_point() and targets.shape == logits.shape


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every target, for (N, C) logits or (N, T, C) sequences; targets are class indices
    ((N,) or (N, T)) or class probabilities of the logits' shape (soft labels, one-hot), as F.cross_entropy takes."""
    classes = logits.shape[-1]
    if is_probabilities(logits, targets):
        return F.cross_entropy(logits.reshape(-1, classes), targets.reshape(-1, classes))
    return F.cross_entropy(logits.reshape(-1, classes), targets.reshape(-1))


@dataclass
class Workload:
    train_set: Dataset  # items are (input, target)
    val_set: Dataset | None  # None: the workload measures no accuracy
    model: nn.Module
    example_input: torch.Tensor  # one sample with its batch dimension, for FLOPs and model pruning
    loss_fn: LossFn = cross_entropy
    model_pruning_ignored: list[nn.Module] = field(default_factory=list)  # structured model pruning keeps these
    # 2:4 model pruning keeps these dense; None: the model's first and last nn.Linear (its input layer and head)
    semi_sparse_kept: list[nn.Module] | None = None
    tokens_per_sample: int = 0  # > 0 for language models: throughput is also reported in tokens/s
    model_flops_per_token: Callable[[nn.Module], float] | None = None  # analytic training FLOPs, after model pruning
    checkpoint_blocks: list[nn.Module] = field(default_factory=list)  # what activation checkpointing wraps
    # loader.augment_on_device: the train set without per-sample augmentation, and the batched augmentation
    # that runs on the device instead; None when the workload has no augmentation to move.
    device_augment_train_set: Dataset | None = None
    device_augment: Callable[[torch.Tensor], torch.Tensor] | None = None

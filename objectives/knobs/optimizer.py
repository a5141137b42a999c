"""The optimizer: AdamW, with torch's fused multi-tensor kernel when ``optim.fused`` is on.

The fused kernel updates every parameter in one launch (CUDA, and CPU since
torch 2.4) instead of a loop of small ops; the maths is the same AdamW.
The ``optim`` section's LR rule keys (``base_batch_size``, ``lr_scaling``)
belong to the batch-size knob (objectives/knobs/batch_size.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from objectives.knobs.knob import Knob

if TYPE_CHECKING:
    import torch


@dataclass
class OptimConfig:
    """The ``optim`` section."""

    lr: float = 0.005
    """AdamW learning rate at ``base_batch_size``."""
    base_batch_size: int = 64
    """The global batch ``lr`` is tuned for."""
    lr_scaling: str = "sqrt"
    """How the LR follows the global batch: sqrt | linear | none."""
    weight_decay: float = 0.0
    """AdamW's decoupled weight decay."""
    fused: bool = False
    """torch's fused AdamW kernel (CUDA, and CPU since torch 2.4)."""


def build_optimizer(optim: OptimConfig, params: Iterable[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """Created last, after every knob that replaces modules, so it holds the final parameters."""
    import torch

    return torch.optim.AdamW(params, lr=lr, weight_decay=optim.weight_decay, fused=optim.fused or None)


KNOB = Knob(
    name="optimizer",
    section="optim",
    values="AdamW `lr`, `weight_decay`, `fused` kernel",
    acts_on="optimizer",
    config=OptimConfig,
    rules={
        "optim.lr": ("a finite float > 0", lambda v: v > 0 and math.isfinite(v), 0.005),
        "optim.weight_decay": ("a finite float >= 0", lambda v: v >= 0 and math.isfinite(v), 0.0),
    },
    applies=("build_optimizer",),
    speed_only=('optim.fused',),
    work_neutral=('optim.lr',),
)

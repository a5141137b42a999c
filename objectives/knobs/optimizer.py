"""The optimizer: AdamW, with torch's fused multi-tensor kernel when ``optim.fused`` is on.

The fused kernel updates every parameter in one launch (CUDA, and CPU since
torch 2.4) instead of a loop of small ops; the maths is the same AdamW.
"""

from __future__ import annotations

from typing import Iterable

import torch

from objectives.config import OptimConfig


def build_optimizer(optim: OptimConfig, params: Iterable[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """Created last, after every knob that replaces modules, so it holds the final parameters."""
    return torch.optim.AdamW(params, lr=lr, weight_decay=optim.weight_decay, fused=optim.fused or None)

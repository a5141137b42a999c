"""Batch size: how many optimizer steps the fixed sample budget buys, and the LR that goes with it.

The budget is in samples, the same for every trial, so a bigger batch means
fewer steps; the learning rate follows a scaling rule from the batch it was
tuned at (``optim.base_batch_size``) so that batch size is compared fairly.
"""

from __future__ import annotations

import math

from objectives.knobs.knob import Knob
from objectives.knobs.optimizer import OptimConfig

LR_SCALINGS = ("sqrt", "linear", "none")


def global_batch_size(batch_size: int, world_size: int, grad_accum: int = 1) -> int:
    """Samples per optimizer step over all DDP ranks and accumulated micro-batches; ``batch_size`` is per rank."""
    return batch_size * world_size * grad_accum


def steps_for_budget(budget_samples: int, global_batch: int) -> int:
    """Enough whole steps to cover the budget; the last step may overshoot it."""
    return math.ceil(budget_samples / global_batch)


def apply_lr_scaling(optim: OptimConfig, global_batch: int) -> float:
    """LR for this global batch: ``lr * f(global_batch / base_batch_size)``."""
    ratio = global_batch / optim.base_batch_size
    factor = {"sqrt": math.sqrt(ratio), "linear": ratio, "none": 1.0}[optim.lr_scaling]
    return optim.lr * factor


KNOB = Knob(
    name="batch size",
    section="batch_size",
    values="samples per device per step; LR follows the global batch by `optim.lr_scaling` "
           "(`sqrt`, `linear`, `none`) from `optim.base_batch_size`",
    acts_on="loader, optimizer",
    rules={
        "batch_size": ("an int >= 1", lambda v: v >= 1, 64),
        "optim.base_batch_size": ("an int >= 1", lambda v: v >= 1, 64),
        "optim.lr_scaling": (f"one of {', '.join(LR_SCALINGS)}", lambda v: v in LR_SCALINGS, "sqrt"),
    },
    applies=("apply_lr_scaling",),
    work_neutral=("optim.base_batch_size", "optim.lr_scaling"),  # the LR only
)

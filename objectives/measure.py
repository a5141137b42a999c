"""Things a trial reports about its model and process, besides speed and accuracy.

FlopCounterMode imports torch._dynamo lazily on first use, which costs ~1.5 s;
importing it here moves that cost into ``import objectives``, which the
sweep's forkserver preloads once instead of every trial paying it.
"""

from __future__ import annotations

import resource

import psutil
import torch
import torch._dynamo  # noqa: F401 - see below
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def params_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def params_nonzero(model: nn.Module) -> int:
    """Nonzeros of the weights as the model computes with them (masks applied)."""
    total = 0
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if name.endswith("_orig") and hasattr(module, name[: -len("_orig")] + "_mask"):
                p = getattr(module, name[: -len("_orig")])
            total += int(torch.count_nonzero(p.detach()))
    return total


def flops_per_sample(model: nn.Module, example_input: torch.Tensor) -> int:
    """Forward FLOPs for one sample, counted by torch's FlopCounterMode in eval mode."""
    return counted_forward(model, example_input)[0]


def counted_forward(model: nn.Module, example_input: torch.Tensor) -> tuple[int, tuple[int, ...] | None]:
    """Forward FLOPs of the example batch (eval mode) and the output's shape (None: not one tensor)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = model(example_input)
    finally:
        model.train(was_training)
    return int(counter.get_total_flops()), tuple(out.shape) if isinstance(out, torch.Tensor) else None


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child_pids() -> set[int]:
    try:
        return {c.pid for c in psutil.Process().children(recursive=False) if c.is_running()}
    except psutil.Error:
        return set()


def new_child_processes(baseline: set[int]) -> int:
    """Live children started since ``baseline``: the DataLoader workers during training."""
    return len(child_pids() - baseline)

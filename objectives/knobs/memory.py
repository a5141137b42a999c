"""Memory: activation checkpointing and the CUDA allocator's expandable segments.

Activation checkpointing wraps the blocks a workload names
(``Workload.checkpoint_blocks``: gpt's transformer blocks, resnet's residual
blocks, digits' feature extractor) with torch's non-reentrant checkpoint
wrapper, so their activations are recomputed in the backward pass instead of
kept: less peak memory for some extra compute. Expandable segments let the
caching allocator grow a segment instead of fragmenting (CUDA only).
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing as wrap_blocks,
    checkpoint_wrapper,
)

from objectives.config import ConfigError, MemoryConfig


def check_memory(memory: MemoryConfig, device_type: str) -> None:
    if memory.expandable_segments and device_type != "cuda":
        raise ConfigError(
            f"memory.expandable_segments is a CUDA allocator setting; got true on device {device_type!r}; "
            "fix: memory.expandable_segments=false"
        )


def apply_expandable_segments(memory: MemoryConfig, device_type: str) -> None:
    """Set before the first CUDA allocation of this process (each trial is a fresh process)."""
    if device_type == "cuda":
        torch.cuda.memory._set_allocator_settings(f"expandable_segments:{memory.expandable_segments}")


def checkpointing_skip_reason(memory: MemoryConfig, blocks: list[nn.Module]) -> str:
    if memory.activation_checkpointing and not blocks:
        return "the workload names no blocks to checkpoint (Workload.checkpoint_blocks)"
    return ""


def apply_activation_checkpointing(memory: MemoryConfig, model: nn.Module, blocks: list[nn.Module]) -> nn.Module:
    """Wrap each of ``blocks`` in place (the wrapper replaces it in its parent module)."""
    if not memory.activation_checkpointing or not blocks:
        return model
    ids = {id(b) for b in blocks}
    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    wrap_blocks(model, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: id(m) in ids)
    return model

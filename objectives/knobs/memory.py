"""Memory: activation checkpointing and the CUDA allocator's expandable segments.

Activation checkpointing wraps the blocks a workload names
(``Workload.checkpoint_blocks``: gpt's transformer blocks, resnet's residual
blocks, digits' feature extractor) with torch's non-reentrant checkpoint
wrapper, so their activations are recomputed in the backward pass instead of
kept: less peak memory for some extra compute. Expandable segments let the
caching allocator grow a segment instead of fragmenting (CUDA only).

The allocator reads its settings once, from PYTORCH_CUDA_ALLOC_CONF, when
CUDA starts; so the trial's process sets the variable before torch touches
CUDA (search/trial/child.py), and DDP ranks inherit it. Setting it through
torch.cuda.memory._set_allocator_settings instead is private and deprecated
(a FutureWarning in torch 2.13).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, MutableMapping

from objectives.hardware import Hardware, require_gpu
from objectives.knobs.knob import Knob

if TYPE_CHECKING:
    from torch import nn


@dataclass
class MemoryConfig:
    """The ``memory`` section."""

    activation_checkpointing: bool = False
    """Recompute the workload's blocks in backward instead of keeping their activations."""
    expandable_segments: bool = False
    """The CUDA caching allocator grows segments instead of fragmenting (GPU only)."""


def check_hardware(memory: MemoryConfig, hw: Hardware) -> None:
    if memory.expandable_segments:
        require_gpu("memory.expandable_segments", "a CUDA allocator setting", hw)


ALLOC_CONF_ENV = "PYTORCH_CUDA_ALLOC_CONF"
NEW_ALLOC_CONF_ENV = "PYTORCH_ALLOC_CONF"  # torch's device-neutral name for the same settings


def allocator_conf(expandable_segments: bool, current: str | None) -> str:
    """The allocator settings with ``expandable_segments`` as the knob says (the knob wins
    over the user's own value, so a sweep compares what it thinks it compares) and every
    other setting the user gave kept."""
    kept = [part.strip() for part in (current or "").split(",")
            if part.strip() and part.split(":")[0].strip() != "expandable_segments"]
    return ",".join(kept + [f"expandable_segments:{expandable_segments}"])


def apply_expandable_segments(expandable_segments: bool, environ: MutableMapping[str, str] = os.environ) -> None:
    """Set in a fresh trial process before torch starts CUDA. Starts from the user's
    PYTORCH_CUDA_ALLOC_CONF, or torch's newer name PYTORCH_ALLOC_CONF, and writes the result to each of the two
    the trial has: which one torch reads first when both are set has changed between releases (c10's
    AllocatorConfig), so both say the same."""
    current = environ.get(ALLOC_CONF_ENV) or environ.get(NEW_ALLOC_CONF_ENV)
    merged = allocator_conf(expandable_segments, current)
    environ[ALLOC_CONF_ENV] = merged
    if NEW_ALLOC_CONF_ENV in environ:
        environ[NEW_ALLOC_CONF_ENV] = merged


def checkpointing_skip_reason(memory: MemoryConfig, blocks: list[nn.Module]) -> str:
    if memory.activation_checkpointing and not blocks:
        return "the workload names no blocks to checkpoint (Workload.checkpoint_blocks)"
    return ""


def apply_activation_checkpointing(memory: MemoryConfig, model: nn.Module, blocks: list[nn.Module]) -> nn.Module:
    """Wrap each of ``blocks`` in place (the wrapper replaces it in its parent module)."""
    if not memory.activation_checkpointing or not blocks:
        return model
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing as wrap

    ids = {id(b) for b in blocks}
    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    wrap(model, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: id(m) in ids)
    return model


KNOB = Knob(
    name="memory",
    section="memory",
    values="`activation_checkpointing`, `expandable_segments` (CUDA allocator)",
    acts_on="model, allocator",
    config=MemoryConfig,
    check_hardware=check_hardware,
    doctor_values=lambda hw: {"memory.expandable_segments": [False, True]},
    applies=("apply_expandable_segments", "apply_activation_checkpointing"),
    speed_only=('memory.activation_checkpointing', 'memory.expandable_segments'),
)

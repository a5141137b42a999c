"""DataLoader workers: the knob that moves per-sample CPU work off the training process.

``augment_on_device`` takes the per-sample augmentation out of the loader:
the workload's un-augmented samples are loaded and its batched augmentation
runs on the device (the loop calls it on each batch), which on a GPU keeps
the input pipeline from starving it.

``persistent_workers`` and ``prefetch_factor`` only mean something with
worker processes, and DataLoader rejects them otherwise, so they are passed
only when ``num_workers > 0``. ``pin_memory`` only means something with a
GPU to copy to; on a CPU it is a no-op that DataLoader warns about on every
trial, so it is passed only when the trial trains on CUDA. Its default
(``null``) turns it on there: the loop copies batches with
``non_blocking=True``, which from pageable memory is a synchronous copy, so
unpinned batches would stall the step they feed.

Workers are forked, as in a plain PyTorch run on Linux, whatever start
method launched this process: a trial runs in a forkserver child, whose
default start method is forkserver, and starting each worker from there
cost about 3 s per epoch (measured: 7.2 s against 1.4 s of training for
3,000 samples with one worker).
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from objectives.hardware import Hardware
from objectives.knobs.knob import Knob

if TYPE_CHECKING:
    from torch.utils.data import DataLoader, Dataset, Sampler


@dataclass
class LoaderConfig:
    """The ``loader`` section."""

    num_workers: int = 0
    """DataLoader worker processes (forked); 0 loads in the training process."""
    pin_memory: bool | None = field(default=None, metadata={"kind": bool})
    """Page-locked batches for asynchronous host-to-GPU copies; null: on when the trial trains on CUDA."""
    persistent_workers: bool = False
    """Keep the workers between epochs; used only when ``num_workers > 0``."""
    prefetch_factor: int = 2
    """Batches each worker loads ahead; used only when ``num_workers > 0``."""
    augment_on_device: bool = False
    """Load un-augmented samples and augment whole batches on the device."""


def resolved_values(loader: LoaderConfig, hardware: Hardware) -> dict[str, Any]:
    """``loader.pin_memory`` as a trial on this machine runs it (null: on with a GPU)."""
    return {"loader.pin_memory": pin_memory(loader, hardware.device_type)}


def pin_memory(loader: LoaderConfig, device_type: str) -> bool:
    """``loader.pin_memory`` on this device: null means on for CUDA; never on a CPU."""
    wanted = device_type == "cuda" if loader.pin_memory is None else loader.pin_memory
    return wanted and device_type == "cuda"


def loader_kwargs(loader: LoaderConfig) -> dict[str, Any]:
    import torch

    device_type = "cuda" if torch.cuda.is_available() else "cpu"  # a trial trains on CUDA whenever it has it
    kwargs: dict[str, Any] = {"num_workers": loader.num_workers, "pin_memory": pin_memory(loader, device_type)}
    if loader.num_workers > 0:
        kwargs["persistent_workers"] = loader.persistent_workers
        kwargs["prefetch_factor"] = loader.prefetch_factor
        if sys.platform == "linux":
            kwargs["multiprocessing_context"] = mp.get_context("fork")
    return kwargs


def apply_loader(loader: LoaderConfig, dataset: Dataset, batch_size: int, sampler: Sampler) -> DataLoader:
    """The training DataLoader; the sampler already shards and pads, so every batch is full."""
    from torch.utils.data import DataLoader

    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True, **loader_kwargs(loader))


def unused_keys(loader: LoaderConfig) -> tuple[str, ...]:
    """The keys DataLoader is not given at these values: the workers' own without worker processes."""
    return ("loader.persistent_workers", "loader.prefetch_factor") if loader.num_workers == 0 else ()


def device_augment_skip_reason(loader: LoaderConfig, device_augment: Callable | None) -> str:
    if loader.augment_on_device and device_augment is None:
        return "the workload has no augmentation to move to the device"
    return ""


KNOB = Knob(
    name="workers",
    section="loader",
    values="DataLoader `num_workers`, `pin_memory`, `prefetch_factor`, `persistent_workers`, `augment_on_device`",
    acts_on="loader",
    config=LoaderConfig,
    rules={
        "loader.num_workers": ("an int >= 0", lambda v: v >= 0, 0),
        "loader.prefetch_factor": ("an int >= 1", lambda v: v >= 1, 2),
    },
    applies=("apply_loader",),
    unused=unused_keys,
    resolved=resolved_values,
    speed_only=('loader.num_workers', 'loader.pin_memory', 'loader.persistent_workers', 'loader.prefetch_factor'),
)

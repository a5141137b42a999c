"""Parallelism: CPU threads per rank and DDP over ``parallel.devices`` ranks.

gloo on CPU, nccl on CUDA, rendezvous through the TCPStore server on
127.0.0.1 that the launcher holds (objectives/launch.py); every rank is its client. Each rank trains ``batch_size`` samples per step, DDP averages
gradients, so k ranks at batch B take the same step as one rank at k*B.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from objectives.config_check import HardwareError
from objectives.hardware import Hardware
from objectives.knobs.knob import Knob

if TYPE_CHECKING:
    import torch
    from torch import nn

COLLECTIVE_TIMEOUT_S = 300


@dataclass
class ParallelConfig:
    """The ``parallel`` section (``compile`` and ``compile_backend`` belong to objectives/knobs/compile.py)."""

    devices: int = 1
    """DDP world size: ranks, one per GPU (NCCL) or CPU process (gloo)."""
    threads: int = 1
    """torch intra-op threads per rank."""
    compile: str = "none"
    """torch.compile mode: none | default | reduce-overhead | max-autotune."""
    compile_backend: str = "inductor"
    """torch.compile backend (tests use aot_eager); compile time is reported as compile_wall_s."""
    grad_accum: int = 1
    """Micro-batches per optimizer step; the global batch includes them."""


def apply_threads(parallel: ParallelConfig) -> None:
    import torch

    torch.set_num_threads(parallel.threads)


def device_for_rank(rank: int) -> torch.device:
    import torch

    return torch.device("cuda", rank) if torch.cuda.is_available() else torch.device("cpu")


def check_hardware(parallel: ParallelConfig, hw: Hardware) -> None:
    """Refuse more ranks than GPUs, or on a CPU more rank threads than cores.

    Oversubscribed CPU ranks do not fail, they crawl (OpenMP threads spin
    waiting for a core: 2 ranks x 2 threads on 2 cores trains ~20x slower),
    which a sweep would only learn through timeouts.
    """
    if hw.gpu_count:
        if parallel.devices > hw.gpu_count:
            raise HardwareError(
                f"parallel.devices must be <= the CUDA devices available ({hw.gpu_count}); got {parallel.devices}; "
                f"fix: parallel.devices={hw.gpu_count}",
                ("parallel.devices",),
            )
        return
    cores = hw.cpu_cores
    if parallel.devices * parallel.threads > cores:
        raise HardwareError(
            f"parallel.devices * parallel.threads must be <= the CPU cores available ({cores}); "
            f"got {parallel.devices} * {parallel.threads} = {parallel.devices * parallel.threads}; "
            f"fix: parallel.devices={min(parallel.devices, cores)} parallel.threads={max(1, cores // parallel.devices)}",
            ("parallel.devices", "parallel.threads"),
        )


def backend() -> str:
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def init_process_group(rank: int, world_size: int, port: int, timeout_s: float = COLLECTIVE_TIMEOUT_S) -> None:
    """Join the process group through the launcher's TCPStore on ``port`` (no rank binds a port).
    ``timeout_s``: how long a collective waits on a peer; a trial's is its whole limit
    (objectives/launch.py ``trial_limit_s``), since one rank may compile or evaluate alone far longer
    than 300 s (NCCL's watchdog would abort the waiting rank, and the trial end ``crashed``)."""
    import torch
    import torch.distributed as dist

    if torch.cuda.is_available():
        torch.cuda.set_device(rank)
    timeout = timedelta(seconds=timeout_s)
    store = dist.TCPStore("127.0.0.1", port, None, False, timeout)
    dist.init_process_group(backend(), store=store, rank=rank, world_size=world_size, timeout=timeout)


def apply_ddp(parallel: ParallelConfig, model: nn.Module, device: torch.device) -> nn.Module:
    """Wrap in DDP when there is more than one rank; one rank trains the bare model."""
    if parallel.devices == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def global_mean(value: torch.Tensor) -> torch.Tensor:
    """Mean over ranks (elementwise), so every rank takes the same stop/continue decision.

    One all-reduce: the training loop calls it at timing-window edges only,
    never per step (objectives/train.py)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return value
    value = value.detach().clone()
    dist.all_reduce(value)
    return value / dist.get_world_size()


def unwrap(model: nn.Module) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


def rank0_decides(flag: bool) -> bool:
    """Rank 0's flag on every rank (only rank 0 evaluates, all ranks must stop together)."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        return flag
    device = torch.device("cuda", torch.cuda.current_device()) if backend() == "nccl" else torch.device("cpu")
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.broadcast(value, src=0)
    return bool(value.item() > 0.5)


KNOB = Knob(
    name="parallelism",
    section="parallel",
    values="`devices` (DDP world size: NCCL on GPU, gloo on CPU), CPU `threads` per rank, `grad_accum` micro-batches",
    acts_on="process, step",
    config=ParallelConfig,
    rules={
        "parallel.devices": ("an int >= 1", lambda v: v >= 1, 1),
        "parallel.threads": ("an int >= 1", lambda v: v >= 1, 1),
        "parallel.grad_accum": ("an int >= 1", lambda v: v >= 1, 1),
    },
    check_hardware=check_hardware,
    doctor_values=lambda hw: {"parallel.devices": list(range(1, (hw.gpu_count or hw.cpu_cores) + 1))},
    applies=("apply_threads", "apply_ddp"),
    speed_only=('parallel.threads',),
)

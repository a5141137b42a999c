"""What the machine's memory allows a trial: the address-space cap refused where a GPU is visible.

(Which knob values this machine runs is the knobs' own hardware checks,
objectives/knobs/, on the facts search/measure/machine.py reads from NVML;
search/sweep/combinations.py applies them to the space.)"""
from __future__ import annotations

from typing import Any

from search.errors import BadInput


def check_memory_cap(max_memory_bytes: Any, gpu_count: int) -> None:
    """`trial.max_memory_bytes` is RLIMIT_AS, a cap on the trial's address space, which
    makes out-of-memory real on a CPU. CUDA reserves address space far beyond any
    memory when it starts (one virtual range for the host's and every GPU's
    memory), so under the cap CUDA itself fails to start and every trial would
    end `oom`. Refused, not translated: torch.cuda.set_per_process_memory_fraction
    caps the GPU allocator, a different memory, and the GPU's own out-of-memory
    is recorded as `oom` without any cap."""
    if max_memory_bytes is not None and gpu_count > 0:
        raise BadInput(f"trial.max_memory_bytes must be null on a machine with a GPU (it caps address space, and "
                       f"CUDA reserves far more than that when it starts, so every trial would end oom); got "
                       f"{max_memory_bytes} with {gpu_count} GPU(s) visible; fix: trial.max_memory_bytes=null "
                       f"(a GPU's out of memory is an oom outcome without it), or CUDA_VISIBLE_DEVICES= for a CPU sweep")

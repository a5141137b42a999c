"""The facts a knob's hardware check reads: one small record, filled two ways.

The sweep fills it from NVML and the OS (search/measure/hardware.py), so its
own process never starts CUDA (forked CUDA children would break); the trial
fills it from torch (``from_torch``) before it trains. Every knob's
``check_hardware`` reads only this record, so doctor, the search space and the
trial refuse exactly the same values for the same reason.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from objectives.config_check import HardwareError


@dataclass(frozen=True)
class Hardware:
    """What this machine offers a trial."""

    cpu_cores: int
    """CPU cores this process may run on (its affinity mask, not the machine's total)."""
    gpu_count: int = 0
    """CUDA devices a trial can use; 0 trains on the CPU."""
    compute_capability: tuple[int, int] | None = None
    """The lowest compute capability among those GPUs; None without a GPU."""
    cusparselt: bool = False
    """Whether the torch build has cuSPARSELt (2:4 model pruning's kernels)."""
    torchao: bool = False
    """Whether torchao is installed (fp8 training, 2:4 model pruning)."""
    why_no_gpu: str = ""
    """Why ``gpu_count`` is 0 ("" when there are GPUs), for error messages."""

    @property
    def device_type(self) -> str:
        return "cuda" if self.gpu_count else "cpu"

    def capability_at_least(self, major: int, minor: int) -> bool:
        return self.gpu_count > 0 and (self.compute_capability or (0, 0)) >= (major, minor)

    def shown_capability(self) -> str:
        """``"8.0"``, or why there is no GPU."""
        if not self.gpu_count or self.compute_capability is None:
            return f"no usable GPU ({self.why_no_gpu or 'none found'})"
        return f"compute capability {self.compute_capability[0]}.{self.compute_capability[1]}"


def require_gpu(key: str, why: str, hw: Hardware) -> None:
    """A GPU-only switch (``key`` set true) on a machine without a usable GPU: one line, the fix is off."""
    if not hw.gpu_count:
        raise HardwareError(f"{key} needs a CUDA GPU ({why}); got true with {hw.shown_capability()}; "
                            f"fix: {key}=false", (key,))


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def torchao_installed() -> bool:
    """Looked up, not imported: importing torchao takes seconds."""
    try:
        return importlib.util.find_spec("torchao") is not None
    except (ImportError, ValueError):
        return False


def from_torch() -> Hardware:
    """The facts as the trial's torch sees them (this starts CUDA, which a trial may)."""
    import torch

    cusparselt = bool(torch.backends.cusparselt.is_available())
    if not torch.cuda.is_available():
        why = "torch is a CPU-only build" if torch.version.cuda is None else "torch.cuda.is_available() is false"
        return Hardware(cpu_cores(), 0, None, cusparselt, torchao_installed(), why)
    count = torch.cuda.device_count()
    capability = min(torch.cuda.get_device_capability(i) for i in range(count))
    return Hardware(cpu_cores(), count, capability, cusparselt, torchao_installed())

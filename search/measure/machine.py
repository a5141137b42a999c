"""What this machine can run: its GPUs and the knob values they admit.

The same facts serve `python -m search doctor` (its table) and the sweep,
which drops the values this machine cannot run from the search space before
the first trial (fp8 on a CPU, tf32 without Ampere), said once instead of
failing as trials. GPU facts come from NVML, not torch.cuda, so asking them
leaves the sweep process fork-safe for CUDA.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from search.measure import nvml

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
SEMI_STRUCTURED = "model_pruning.method='2:4'"  # as search.sweep.space.to_override writes it (the colon needs quotes)


@dataclass
class Gpus:
    """The GPUs a trial could use: their count and the lowest compute capability among them."""

    count: int
    capability: tuple[int, int] | None
    why_none: str  # "" when count > 0


def gpus() -> Gpus:
    torch_cuda = _torch_cuda_version()
    reason = nvml.start()
    if reason is not None:
        return Gpus(0, None, f"NVML: {reason}")
    try:
        indices = nvml.visible_indices(nvml.device_count())
        caps = [nvml.compute_capability(nvml.handle(i)) for i in indices]
    except Exception as err:
        return Gpus(0, None, f"NVML: {type(err).__name__}: {err}")
    finally:
        nvml.stop()
    if not caps:
        return Gpus(0, None, "CUDA_VISIBLE_DEVICES hides every GPU")
    if torch_cuda is None:
        return Gpus(0, None, f"{len(caps)} GPU(s) present but torch is a CPU-only build")
    return Gpus(len(caps), min(caps), "")


def runnable_knob_values() -> dict[str, list]:
    """Values of the hardware-bound knobs that this machine can run."""
    g = gpus()
    removed = _removed_precisions(g)
    max_devices = g.count if g.count else _cpu_cores()
    return {"precision": [p for p in PRECISIONS if p not in removed],
            "parallel.devices": list(range(1, max_devices + 1))}


def removed_values() -> dict[str, str]:
    """'knob=value' -> why this machine cannot run it, for values the space may name."""
    g = gpus()
    removed = {f"precision={p}": why for p, why in _removed_precisions(g).items()}
    return {**removed, **_removed_gpu_switches(g)}


def _removed_gpu_switches(g: Gpus) -> dict[str, str]:
    """Knob values that exist only with CUDA (or a newer GPU) besides the precisions."""
    out = {}
    if g.count == 0:
        for line, what in (("framework.cudnn_benchmark=true", "cuDNN"),
                           ("memory.expandable_segments=true", "the CUDA caching allocator")):
            out[line] = f"needs a CUDA GPU ({what}); no usable GPU ({g.why_none})"
        out[SEMI_STRUCTURED] = f"needs a GPU with compute capability >= 8.0; no usable GPU ({g.why_none})"
    elif (g.capability or (0, 0)) < (8, 0):
        out[SEMI_STRUCTURED] = "needs compute capability >= 8.0 (sparse tensor cores)"
    elif not _has_cusparselt():
        out[SEMI_STRUCTURED] = "needs cuSPARSELt, which this torch build lacks; fix: install a CUDA build of torch"
    elif not _importable("torchao.sparsity.training"):
        out[SEMI_STRUCTURED] = "needs torchao; fix: pip install 'torchao>=0.18'"
    return out


def _removed_precisions(g: Gpus) -> dict[str, str]:
    if g.count == 0:
        return {"tf32": f"needs a GPU with compute capability >= 8.0 (Ampere); no usable GPU ({g.why_none})",
                "fp16": f"needs a CUDA GPU; no usable GPU ({g.why_none})",
                "fp8": f"needs a GPU with compute capability >= 8.9 and torchao; no usable GPU ({g.why_none})"}
    cap = g.capability or (0, 0)
    shown = f"{cap[0]}.{cap[1]}"
    out = {}
    if cap < (8, 0):
        out["tf32"] = f"needs compute capability >= 8.0 (Ampere); this GPU has {shown}"
        out["bf16"] = f"needs compute capability >= 8.0 for bf16 tensor cores; this GPU has {shown}"
    if cap < (8, 9):
        out["fp8"] = f"needs compute capability >= 8.9 (Ada/Hopper); this GPU has {shown}"
    elif not _importable("torchao.float8"):
        out["fp8"] = "needs torchao; fix: pip install 'torchao>=0.18'"
    return out


def _cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _torch_cuda_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda


def _has_cusparselt() -> bool:
    """Whether this torch build has cuSPARSELt (2:4's kernels); a build flag, so CUDA is not started."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.backends.cusparselt.is_available())


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False

"""What this machine can run: its GPUs and the knob values they admit.

``machine_hardware()`` fills the one facts record the knobs' hardware checks
read (objectives/hardware.py; the trial fills the same record from torch).
The same facts and checks serve `python -m search doctor` (its table) and the
sweep, which drops the values this machine cannot run from the search space
before the first trial (fp8 on a CPU, tf32 without Ampere) and never proposes
a combination it cannot run (search/sweep/combinations.py), said once instead
of failing as trials. GPU facts come from NVML, not torch.cuda, so asking
them leaves the sweep process fork-safe for CUDA.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from objectives.hardware import Hardware, cpu_cores, torchao_installed
from search.measure import nvml
from search.measure.torch_build import torch_build


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


def machine_hardware() -> Hardware:
    """This machine's facts for the knobs' hardware checks (objectives/hardware.py), from NVML and the OS."""
    g = gpus()
    # cuSPARSELt is a fact of a GPU build: asked only with a GPU, so the sweep of a CPU imports no torch.
    return Hardware(cpu_cores(), g.count, g.capability, bool(g.count) and _has_cusparselt(), torchao_installed(),
                    g.why_none)


def knob_values(hw: Hardware) -> dict[str, dict[Any, str]]:
    """Key -> {value: why this machine cannot run it, "" when it can} for the values each knob's
    ``doctor_values`` names, judged by the knobs' own hardware checks at the defaults, each
    value with the company it needs to act (2:4 with ratio 0.5 and bf16)."""
    from objectives.config import TrialConfig, with_values
    from objectives.knobs import KNOBS, broken_rules
    from objectives.config_check import HardwareError

    table: dict[str, dict[Any, str]] = {}
    for knob in KNOBS:
        for key, values in (knob.doctor_values(hw) if knob.doctor_values else {}).items():
            row = table.setdefault(key, {})
            for value in values:
                cfg = with_values(TrialConfig(), {**knob.company.get((key, value), {}), key: value})
                refused = [err for err in broken_rules(cfg, hw) if isinstance(err, HardwareError)]
                row[value] = str(refused[0]) if refused else ""
    return table


def runnable_knob_values(hw: Hardware | None = None) -> dict[str, list]:
    """Values of the hardware-bound knobs that this machine can run."""
    table = knob_values(hw or machine_hardware())
    return {key: [v for v, why in row.items() if not why] for key, row in table.items()}


def removed_values(hw: Hardware | None = None) -> dict[str, str]:
    """'knob=value' (as search.sweep.space.to_override writes it) -> why this machine cannot run it."""
    from search.sweep.space import to_override

    table = knob_values(hw or machine_hardware())
    return {to_override(key, v): why for key, row in table.items() for v, why in row.items() if why}


def _torch_cuda_version() -> str | None:
    build = torch_build()  # read from torch/version.py: importing torch costs the sweep seconds
    return None if build is None else build.cuda


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

"""The software and hardware a measurement was taken on, as strings.

Throughput is only comparable between runs on the same fingerprint; the
nightly run diffs tonight's against last night's to say *why* a number moved
("torch_version: 2.12.0 -> 2.13.0"). GPU facts come from NVML and CUDA facts
from torch.version strings, never from torch.cuda calls: those initialise the
CUDA driver in the sweep process, after which forked trials cannot use CUDA.
"""
from __future__ import annotations

import os
import platform
import socket

from objectives.hardware import cpu_cores
from search.measure import nvml
from search.measure.torch_build import torch_build

TAG_PREFIX = "fingerprint."
KEYS = ("gpu_name", "gpu_count", "driver_version", "cuda_version", "cudnn_version", "torch_version",
        "python_version", "cpu_model", "cpu_count", "cpu_cores_usable", "host", "os")


def collect() -> dict[str, str]:
    """Every key of KEYS with a non-empty string value ("none" where a thing is absent)."""
    out = {**_gpu_facts(), **_torch_facts()}
    out.update(
        python_version=platform.python_version(),
        cpu_model=cpu_model(),
        cpu_count=str(os.cpu_count() or 0),  # the machine's: nightly's "same hardware"
        cpu_cores_usable=str(cpu_cores()),  # what this process may run on (taskset, a cpuset): a change, not a machine
        host=socket.gethostname() or "unknown",
        os=platform.platform(),
    )
    return {key: out.get(key) or "none" for key in KEYS}


def as_tags(fingerprint: dict[str, str]) -> dict[str, str]:
    """`gpu_name` -> `fingerprint.gpu_name`, the MLflow tag names."""
    return {f"{TAG_PREFIX}{k}": v for k, v in fingerprint.items()}


def from_tags(tags: dict[str, str]) -> dict[str, str]:
    """Inverse of as_tags, for reading a fingerprint back from an MLflow run."""
    return {k[len(TAG_PREFIX):]: v for k, v in tags.items() if k.startswith(TAG_PREFIX)}


def diff(old: dict[str, str], new: dict[str, str], ignore_host: bool = False) -> list[str]:
    """One line per key whose value differs: "torch_version: 2.12.0 -> 2.13.0"."""
    lines = []
    for key in [*KEYS, *sorted((set(old) | set(new)) - set(KEYS))]:
        if ignore_host and key == "host":
            continue
        before, after = old.get(key, "(absent)"), new.get(key, "(absent)")
        if before != after and (key in old or key in new):
            lines.append(f"{key}: {before} -> {after}")
    return lines


def changes_since(written: dict[str, str], now: dict[str, str]) -> list[str]:
    """What differs between a study's fingerprint and this machine's, for a sweep that resumes it. Another worker
    starting at the same moment may be writing it, key by key: a key not written yet is not a change (two workers
    on one machine were told "driver_version: (absent) -> none ...: its throughput figures are not comparable")."""
    return diff(written, {k: v for k, v in now.items() if k in written}) if written else []


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _gpu_facts() -> dict[str, str]:
    if nvml.start() is not None:
        return {"gpu_name": "none", "gpu_count": "0", "driver_version": "none"}
    try:
        indices = nvml.visible_indices(nvml.device_count())
        names = [nvml.device_name(nvml.handle(i)) for i in indices]
        return {"gpu_name": ", ".join(dict.fromkeys(names)) or "none", "gpu_count": str(len(names)),
                "driver_version": nvml.driver_version()}
    except Exception as err:  # a GPU that fails to answer is a fact about the machine too
        return {"gpu_name": f"unreadable ({type(err).__name__})", "gpu_count": "0", "driver_version": "none"}
    finally:
        nvml.stop()


def _torch_facts() -> dict[str, str]:
    """From torch/version.py (search/measure/torch_build.py); torch itself is imported only by a CUDA
    build, for cuDNN's version."""
    build = torch_build()
    if build is None:
        return {"cuda_version": "none", "cudnn_version": "none", "torch_version": "none"}
    cudnn = None
    if build.cuda is not None:
        try:
            import torch

            cudnn = torch.backends.cudnn.version()  # loads libcudnn, creates no CUDA context
        except Exception:
            cudnn = None
    return {"cuda_version": build.cuda or "none", "cudnn_version": str(cudnn or "none"),
            "torch_version": build.version}

"""How much CPU this process could use right now without taking it from anything else: the idle time of the
cores it may run on, no more than its cgroup's CPU quota leaves (a Kubernetes pod's limit, a SLURM job's
cgroup), over a short sample.

The sweep imports ahead on a thread only onto such a spare core (search/sweep/sweeper.py _import_ahead):
on a busy machine a thread sharing the first trial's core slowed that trial's measured throughput, and a
thread at the lowest priority instead held the module locks the sweep's main thread needed next for minutes.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import psutil


def _cgroup_dir() -> Path | None:
    """This process's cgroup v2 directory, or None (cgroup v1, or not Linux)."""
    try:
        line = next((ln for ln in Path("/proc/self/cgroup").read_text().splitlines() if ln.startswith("0::")), None)
    except OSError:
        return None
    if line is None:
        return None
    for candidate in (Path("/sys/fs/cgroup") / line[3:].lstrip("/"), Path("/sys/fs/cgroup")):
        if (candidate / "cpu.max").is_file():
            return candidate
    return None


def _quota_cores(cgroup: Path) -> float | None:
    """The cgroup's CPU limit in cores (cpu.max "quota period"); None when it has none ("max")."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _usage_s(cgroup: Path) -> float | None:
    """The CPU seconds the cgroup used so far (cpu.stat usage_usec)."""
    try:
        for line in (cgroup / "cpu.stat").read_text().splitlines():
            name, value = line.split()
            if name == "usage_usec":
                return int(value) / 1e6
    except (OSError, ValueError):
        return None
    return None


def spare_cores(sample_s: float = 0.1) -> float:
    """Cores idle over the next `sample_s` seconds among those this process may run on (its affinity), at most
    its cgroup's quota less what the cgroup used meanwhile. The caller sleeps for the sample."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cgroup = _cgroup_dir()
    quota = _quota_cores(cgroup) if cgroup is not None else None
    used_before = _usage_s(cgroup) if quota is not None else None
    started = time.monotonic()
    busy = psutil.cpu_percent(interval=sample_s, percpu=True)
    idle = sum(1.0 - busy[i] / 100.0 for i in (cpus if cpus is not None else range(len(busy))) if i < len(busy))
    if quota is not None and used_before is not None and (used_after := _usage_s(cgroup)) is not None:
        idle = min(idle, quota - (used_after - used_before) / max(time.monotonic() - started, 1e-6))
    return max(idle, 0.0)

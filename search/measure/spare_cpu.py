"""How much CPU this process could use right now without taking it from anything else: the idle time of the
cores it may run on, no more than its cgroup's CPU quota leaves (a Kubernetes pod's limit, a SLURM job's
cgroup), over a short sample.

The sweep imports ahead on a thread only onto such a spare core (search/sweep/import_ahead.py):
on a busy machine a thread sharing the first trial's core slowed that trial's measured throughput, and a
thread at the lowest priority instead held the module locks the sweep's main thread needed next for minutes.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import psutil


CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_FILE = {"cpu": "cpu.cfs_quota_us", "cpuacct": "cpuacct.usage"}


def _cgroup_dir(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = CGROUP_ROOT,
                controller: str = "cpu") -> Path | None:
    """This process's CPU cgroup directory: cgroup v2's (with cpu.max) or, on cgroup v1 (older Docker hosts,
    some SLURM sites), its `controller`'s (cpu: with cpu.cfs_quota_us; cpuacct, where it is mounted apart from
    cpu: with cpuacct.usage); None when neither is readable (not Linux).
    In a container the path /proc names is the host's, and the container sees its own cgroup at the mount's
    root, so both are tried."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "" and controller == "cpu":
            mounts, limit = [root], "cpu.max"
        elif controller in controllers.split(","):
            mounts, limit = [root / controllers, root / controller], V1_FILE[controller]
        else:
            continue
        for mount in mounts:
            for candidate in (mount / path.lstrip("/"), mount):
                if (candidate / limit).is_file():
                    return candidate
    return None


def _quota_cores(cgroup: Path) -> float | None:
    """The cgroup's CPU limit in cores (v2: cpu.max "quota period"; v1: cpu.cfs_quota_us / cpu.cfs_period_us);
    None when it has none (v2 "max", v1 -1)."""
    try:
        if (cgroup / "cpu.max").is_file():
            quota, period = (cgroup / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota_us = int((cgroup / "cpu.cfs_quota_us").read_text())
        return None if quota_us < 0 else quota_us / int((cgroup / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None


def _usage_s(cgroup: Path, accounting: Path | None = None) -> float | None:
    """The CPU seconds the cgroup used so far (v2: cpu.stat usage_usec; v1: cpuacct.usage, in nanoseconds, in
    the cpu controller's directory or in `accounting`, the cpuacct controller's where it is mounted apart)."""
    try:
        if (cgroup / "cpu.stat").is_file() and (cgroup / "cpu.max").is_file():
            for line in (cgroup / "cpu.stat").read_text().splitlines():
                name, value = line.split()
                if name == "usage_usec":
                    return int(value) / 1e6
            return None
        usage = cgroup / "cpuacct.usage"
        usage = usage if usage.is_file() or accounting is None else accounting / "cpuacct.usage"
        return int(usage.read_text()) / 1e9
    except (OSError, ValueError):
        return None


def spare_cores(sample_s: float = 0.1) -> float:
    """Cores idle over the next `sample_s` seconds among those this process may run on (its affinity), at most
    its cgroup's quota less what the cgroup used meanwhile. The caller sleeps for the sample."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cgroup = _cgroup_dir()
    quota = _quota_cores(cgroup) if cgroup is not None else None
    accounting = _cgroup_dir(controller="cpuacct") if quota is not None else None
    used_before = _usage_s(cgroup, accounting) if quota is not None else None
    started = time.monotonic()
    busy = psutil.cpu_percent(interval=sample_s, percpu=True)
    idle = sum(1.0 - busy[i] / 100.0 for i in (cpus if cpus is not None else range(len(busy))) if i < len(busy))
    if quota is not None:
        used_after = _usage_s(cgroup, accounting) if used_before is not None else None
        # the quota less what the cgroup used meanwhile; the quota alone where its use is not readable
        in_use = 0.0 if used_after is None else (used_after - used_before) / max(time.monotonic() - started, 1e-6)
        idle = min(idle, quota - in_use)
    return max(idle, 0.0)

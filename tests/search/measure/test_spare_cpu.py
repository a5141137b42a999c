"""The sweep imports ahead only onto a spare core (search/measure/spare_cpu.py, search/sweep/import_ahead.py):
at the lowest priority instead, a starved import thread held the module locks the sweep's main thread needed next
(beside 3 busy processes on 2 cores: 231 s for torch, 123 s for scipy)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from search.measure import spare_cpu
from search.sweep import import_ahead as ahead


def test_no_core_is_spare_while_every_core_is_busy() -> None:
    cores = len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores + 1)]
    try:
        time.sleep(0.5)  # the hogs started
        assert spare_cpu.spare_cores(0.3) < ahead.SPARE_CORES
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_a_cgroup_quota_bounds_the_spare_cores(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    assert spare_cpu._quota_cores(tmp_path) == 1.5 and spare_cpu._usage_s(tmp_path) == 2.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert spare_cpu._quota_cores(tmp_path) is None


def test_a_cgroup_v1_quota_is_read_too(tmp_path: Path) -> None:
    """cgroup v1 (older Docker hosts, some SLURM sites): the cpu controller's directory, found through
    /proc/self/cgroup's path or, in a container, at its mount's root; quota and usage in v1's own files."""
    proc = tmp_path / "proc_cgroup"
    proc.write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n")
    mount = tmp_path / "cpu,cpuacct"
    mount.mkdir()
    (mount / "cpu.cfs_quota_us").write_text("-1\n")  # the host's root: no limit
    (mount / "cpu.cfs_period_us").write_text("100000\n")
    assert spare_cpu._cgroup_dir(proc, tmp_path) == mount  # in a container: its own cgroup at the mount's root
    assert spare_cpu._quota_cores(mount) is None
    own = mount / "docker" / "abc"
    own.mkdir(parents=True)
    (own / "cpu.cfs_quota_us").write_text("50000\n")
    (own / "cpu.cfs_period_us").write_text("100000\n")
    (own / "cpu.stat").write_text("nr_periods 10\nnr_throttled 2\nthrottled_time 5000\n")
    (own / "cpuacct.usage").write_text("3000000000\n")
    assert spare_cpu._cgroup_dir(proc, tmp_path) == own  # on the host: the path /proc names
    assert spare_cpu._quota_cores(own) == 0.5 and spare_cpu._usage_s(own) == 3.0
    # cpu and cpuacct mounted apart (as on this project's CI machines): the usage from cpuacct's directory
    proc.write_text("2:cpuacct:/job\n1:cpu:/job\n")
    (tmp_path / "cpu" / "job").mkdir(parents=True)
    (tmp_path / "cpu" / "job" / "cpu.cfs_quota_us").write_text("150000\n")
    (tmp_path / "cpu" / "job" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpuacct" / "job").mkdir(parents=True)
    (tmp_path / "cpuacct" / "job" / "cpuacct.usage").write_text("2500000000\n")
    cpu = spare_cpu._cgroup_dir(proc, tmp_path)
    accounting = spare_cpu._cgroup_dir(proc, tmp_path, "cpuacct")
    assert (cpu, accounting) == (tmp_path / "cpu" / "job", tmp_path / "cpuacct" / "job")
    assert spare_cpu._quota_cores(cpu) == 1.5 and spare_cpu._usage_s(cpu, accounting) == 2.5


def test_a_cgroup_v2_directory_is_found_by_its_path_or_at_the_root(tmp_path: Path) -> None:
    proc = tmp_path / "proc_cgroup"
    proc.write_text("0::/user.slice/job.scope\n")
    assert spare_cpu._cgroup_dir(proc, tmp_path) is None  # no cpu controller anywhere
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert spare_cpu._cgroup_dir(proc, tmp_path) == tmp_path
    own = tmp_path / "user.slice" / "job.scope"
    own.mkdir(parents=True)
    (own / "cpu.max").write_text("200000 100000\n")
    assert spare_cpu._cgroup_dir(proc, tmp_path) == own and spare_cpu._quota_cores(own) == 2.0


@pytest.mark.parametrize("spare, imported", [([2.0, 2.0], ["ahead_one", "ahead_two"]),
                                             ([2.0, 0.0, 2.0], ["ahead_one"]), ([0.0, 2.0], [])])
def test_the_import_thread_stops_at_the_first_module_without_a_spare_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spare: list[float], imported: list[str]) -> None:
    """Each module waits for a spare core; the first time there is none, no module more is imported (the sweep
    imports the rest itself when it needs them, at its own priority)."""
    names = ["ahead_one", "ahead_two"]
    for name in names:
        (tmp_path / f"{name}.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    asked: list[float] = []
    monkeypatch.setattr(ahead, "spare_cores", lambda sample_s: asked.append(spare[len(asked)]) or asked[-1])
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
    ahead.import_ahead(tuple(names), False, threading.Event()).join()
    assert [n for n in names if n in sys.modules] == imported
    assert asked == spare[:len(imported) + (0.0 in spare)]  # not asked again after a refusal

"""The sweep imports ahead only onto a spare core (search/measure/spare_cpu.py, search/sweep/sweeper.py
_import_ahead): at the lowest priority instead, a starved import thread held the module locks the sweep's main
thread needed next (beside 3 busy processes on 2 cores: 231 s for torch, 123 s for scipy)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from search.measure import spare_cpu
from search.sweep import sweeper


def test_no_core_is_spare_while_every_core_is_busy() -> None:
    cores = len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores + 1)]
    try:
        time.sleep(0.5)  # the hogs started
        assert spare_cpu.spare_cores(0.3) < sweeper.SPARE_CORES
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
    monkeypatch.setattr(sweeper, "spare_cores", lambda sample_s: asked.append(spare[len(asked)]) or asked[-1])
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
    sweeper._import_ahead(tuple(names), False, threading.Event()).join()
    assert [n for n in names if n in sys.modules] == imported
    assert asked == spare[:len(imported) + (0.0 in spare)]  # not asked again after a refusal

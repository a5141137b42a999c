"""The exit does not wait for the sweep's imports ahead of use (search/leave.py): a loaded machine starves that
thread (lowest CPU priority), and a finished sweep waited minutes for it; an interrupted one ran past the
cleanup's bound. The exit handlers and the streams' flush still run, with the command's exit status."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from conftest import pythonpath

CHILD = textwrap.dedent("""
    import atexit, sys, threading, time
    from search.leave import IMPORT_AHEAD_THREAD, leave_now_if_importing
    atexit.register(lambda: print("exit handler ran", flush=True))
    threading.Thread(target=time.sleep, args=(600,), name=IMPORT_AHEAD_THREAD, daemon=False).start()
    sys.stdout.write("unflushed last line")  # the streams are flushed before the process ends
    try:
        raise SystemExit(int(sys.argv[1]))
    except SystemExit as done:
        leave_now_if_importing(done.code)
        raise
""")


def test_the_exit_does_not_wait_for_the_imports_ahead_and_keeps_the_status_and_the_output() -> None:
    for status in (0, 130):
        started = time.monotonic()
        child = subprocess.run([sys.executable, "-c", CHILD, str(status)], capture_output=True, text=True,
                               timeout=60, env={"PYTHONPATH": pythonpath()})
        assert time.monotonic() - started < 30  # not the thread's 600 s
        assert child.returncode == status, child.stderr
        assert "unflushed last line" in child.stdout and "exit handler ran" in child.stdout, child.stdout


def test_without_imports_left_python_exits_as_usual() -> None:
    child = subprocess.run([sys.executable, "-c", "from search.leave import leave_now_if_importing\n"
                            "leave_now_if_importing(5)\nprint('went on')\nraise SystemExit(4)"],
                           capture_output=True, text=True, timeout=60, env={"PYTHONPATH": pythonpath()})
    assert child.returncode == 4 and "went on" in child.stdout, child.stderr

"""`python -m search` ends through search/leave.py: as Python's exit would, without the interpreter's teardown,
and without waiting for the sweep's imports ahead of use (a loaded machine starves that thread, lowest CPU
priority, and a finished sweep waited minutes for it; an interrupted one ran past the cleanup's bound). The
exit handlers, the other threads and the streams' flush still run, with the command's exit status."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from conftest import pythonpath

CHILD = textwrap.dedent("""
    import atexit, sys, threading, time
    from search.leave import IMPORT_AHEAD_THREAD, leave
    atexit.register(lambda: print("exit handler ran", flush=True))
    threading.Thread(target=time.sleep, args=(600,), name=IMPORT_AHEAD_THREAD, daemon=False).start()
    threading.Thread(target=lambda: (time.sleep(1), print("other thread ended", flush=True))).start()
    class Teardown:
        def __del__(self):
            print("torn down", flush=True)
    kept = Teardown()
    sys.stdout.write("unflushed last line")  # the streams are flushed before the process ends
    try:
        raise SystemExit(int(sys.argv[1]) if sys.argv[1].isdigit() else sys.argv[1])
    except SystemExit as done:
        leave(done.code)
""")


def leave_with(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": pythonpath()})


def test_the_exit_does_not_wait_for_the_imports_ahead_and_keeps_the_status_and_the_output() -> None:
    for status in (0, 130):
        started = time.monotonic()
        child = leave_with(str(status))
        assert time.monotonic() - started < 30  # not the thread's 600 s
        assert child.returncode == status, child.stderr
        out = child.stdout
        assert "unflushed last line" in out and "exit handler ran" in out and "other thread ended" in out, out
        assert out.index("other thread ended") < out.index("exit handler ran")  # threads first, as Python does
        assert "torn down" not in out  # the interpreter's teardown is skipped


def test_a_message_for_the_exit_is_printed_and_the_status_is_1() -> None:
    child = leave_with("search: no such thing")
    assert child.returncode == 1 and child.stderr.strip() == "search: no such thing", child.stderr


def test_python_m_search_keeps_the_commands_status_and_output() -> None:
    env = {"PYTHONPATH": pythonpath()}
    usage = subprocess.run([sys.executable, "-m", "search", "--help"], capture_output=True, text=True, timeout=60,
                           env=env)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: python -m search"), usage.stdout + usage.stderr
    refused = subprocess.run([sys.executable, "-m", "search", "nosuchcommand"], capture_output=True, text=True,
                             timeout=60, env=env)
    assert refused.returncode == 2 and "the command must be one of" in refused.stderr, refused.stderr

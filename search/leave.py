"""The process's exit without waiting for the sweep's imports ahead of use.

The sweep imports what it will need later (the GP sampler's scipy, the
report's plotting modules) on a background thread while its trials run, one
module at a time onto a spare core (search/sweep/sweeper.py `_import_ahead`).
That thread is not a daemon: before Python 3.14 a daemon thread still
importing when the interpreter finalises can abort the process. But Python's
exit waits for it, for the module in progress at least; when the thread ran
at the lowest CPU priority a loaded machine starved it: beside three busy
processes on 2 cores, a 2-trial sweep (report=false) exited 266 s and 282 s
after its last line (this exit: 2.8 s), and an interrupted sweep ran past the
cleanup's 30 s bound, so the watchdog's line replaced the interrupt's (seen
in the suite at a load average of 7).

When the command is done and the thread still imports, the process ends
here instead: threading's exit hooks (executors join their workers), the
other threads, the exit handlers (logging's flush among them) and the
streams' flush run as at a normal exit; the interpreter's teardown, which
would wait for the thread, is skipped.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading

IMPORT_AHEAD_THREAD = "search-import-ahead"
SETTLE_S = 0.5  # told to stop, the thread usually ends its current module by then
_ours = False  # whether this process's entry point ends it through leave_now_if_importing


def take_the_exit() -> None:
    """Called by `python -m search` at its start: its exit goes through leave_now_if_importing. Elsewhere (a
    user's own Hydra app with the search sweeper) the sweep joins the thread instead, as Python's exit would."""
    global _ours
    _ours = True


def exit_is_ours() -> bool:
    return _ours


def leave_now_if_importing(code: object) -> None:
    """End the process with exit status `code` (SystemExit's) when the imports ahead are still running;
    return otherwise, for Python's own exit."""
    importing = next((t for t in threading.enumerate() if t.name == IMPORT_AHEAD_THREAD and t.is_alive()), None)
    if importing is None:
        return
    importing.join(SETTLE_S)
    if not importing.is_alive():
        return
    for hook in reversed(getattr(threading, "_threading_atexits", [])):  # what threading._shutdown runs first
        hook()
    me = threading.current_thread()
    for t in threading.enumerate():
        if t is not me and t is not importing and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))

"""How `python -m search` ends once its command is done: as Python's exit would, without its teardown.

Python's exit runs threading's exit hooks, waits for the other threads, runs
the exit handlers, flushes the streams, and then tears the interpreter down:
it collects garbage over every object torch, MLflow, scipy and the plotting
modules made and deallocates every module. For a sweep that teardown was the
larger part of the time from its last trial to its exit (0.46 s of 1.13 s,
median of 4 alternating pairs of 4-trial sweeps on 2 cores, with one garbage
collection and a freeze before it; 2.4 s without them); the report drawn
after the last trial is most of the rest. `leave` runs everything before the
teardown, as Python would, and then ends the process with the command's exit
status. What the teardown alone would do is finalise objects still alive or
in reference cycles, which Python does not promise at exit either: the
sweep's files, studies and MLflow runs are written and closed before.

One thread is not waited for: the sweep imports what it will need later (the
GP sampler's scipy, the report's plotting modules) on a background thread
while its trials run, one module at a time onto a spare core
(search/sweep/import_ahead.py `import_ahead`). It is not a daemon (before Python
3.14 a daemon thread still importing when the interpreter finalises can
abort the process), and when it ran at the lowest CPU priority a loaded
machine starved it: beside three busy processes on 2 cores, a 2-trial sweep
(report=false) exited 266 s and 282 s after its last line, and an
interrupted sweep ran past the cleanup's 30 s bound, so the watchdog's line
replaced the interrupt's (seen in the suite at a load average of 7). It gets
SETTLE_S to end the module in progress and is then left.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

IMPORT_AHEAD_THREAD = "search-import-ahead"
SETTLE_S = 0.5  # told to stop, the thread usually ends its current module by then
_ours = False  # whether this process's entry point ends it through leave()


def take_the_exit() -> None:
    """Called by `python -m search` at its start: its exit goes through leave(). Elsewhere (a user's own Hydra
    app with the search sweeper) the sweep joins the import thread instead, and Python's exit runs as usual."""
    global _ours
    _ours = True


def exit_is_ours() -> bool:
    return _ours


def leave(code: object) -> NoReturn:
    """End the process with exit status `code` (SystemExit's: an int, None for 0, anything else printed to stderr
    first and 1, as Python does) after threading's exit hooks (executors join their workers), the other non-daemon
    threads (the imports ahead at most SETTLE_S), the exit handlers (logging's flush and multiprocessing's
    finalisers among them) and the streams' flush; the interpreter's teardown is skipped."""
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
    for hook in reversed(getattr(threading, "_threading_atexits", [])):  # what threading._shutdown runs first
        hook()
    me = threading.current_thread()
    for t in threading.enumerate():
        if t is not me and not t.daemon:
            t.join(SETTLE_S if t.name == IMPORT_AHEAD_THREAD else None)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))

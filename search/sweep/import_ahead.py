"""Modules imported ahead, on a spare core, while the sweep waits on its first trial.

The GP's first model-based ask imports torch and scipy, and the report's
plots import plotly and matplotlib: seconds on the sweep's critical path.
Once the first trial runs in this process's forkserver, a background thread
imports them one after another, only while a core sits spare
(search/measure/spare_cpu.py), so the trial's own core is never shared.
"""
from __future__ import annotations

import importlib
import threading

from search.leave import IMPORT_AHEAD_THREAD
from search.measure.spare_cpu import spare_cores
from search.reports.plots import preload as preload_plots

SPARE_CORES = 0.75  # idle cores (of a core) a module imported ahead needs: the trial's own core is never shared
SPARE_SAMPLE_S = 0.1  # the sample each import waits for


def import_ahead(modules: tuple[str, ...], plots: bool, enough: threading.Event) -> threading.Thread:
    """Import `modules`, then the report's plotting modules when `plots`, on one background thread, one module
    after another while a core sits spare (search/measure/spare_cpu.py) and until `enough` is set (the sweep
    ended); the first time no core is spare it imports nothing more, and the sweep imports the rest when it
    needs them. One import after another, since two threads importing scipy at once may deadlock on its module
    locks.

    Only onto a spare core: a thread sharing the first trial's core on a loaded machine slowed that trial
    (your configuration's first run, 0.87x and 0.92x its second beside 3 busy processes), and the same thread
    at the lowest priority (nice 19) instead was starved while it held the lock of the module it was
    importing: the sweep's main thread, needing that module next (torch and scipy at the GP's first ask, the
    report's plots), waited for it. Beside 3 busy processes on 2 cores the main thread waited 231 s for torch
    and 123 s for scipy, against 3.2 s to import both itself. Here a module starts only with a core idle, at
    the thread's normal priority: a load that arrives meanwhile shares a core with it for that module alone.

    Not a daemon: before Python 3.14 a daemon thread that asks for the GIL after the interpreter began
    finalising is ended with pthread_exit, whose forced unwinding through a C++ frame that may not throw (an
    extension module's init calling back into Python) is std::terminate: a one-trial sweep of a fast objective
    died of SIGABRT ("terminate called without an active exception") in the suite, likely so. Left to Python's
    exit to wait for, it still imported after threading's shutdown had begun, where an import that registers a
    threading exit hook (sklearn, through joblib, imports concurrent.futures.process) raises "can't register
    atexit after shutdown". `python -m search` ends without waiting for it (search/leave.py); a user's own
    Hydra app joins it, at most the module in progress."""
    spare = True  # False from the first time no core was spare: the thread imports nothing more

    def go_on() -> bool:
        nonlocal spare
        spare = spare and not enough.is_set() and spare_cores(SPARE_SAMPLE_S) >= SPARE_CORES
        return spare

    def run() -> None:
        for module in modules:
            if not go_on():
                return
            try:
                importlib.import_module(module)
            except ImportError:  # the sampler says so itself when it needs it
                pass
        if plots:
            preload_plots(go_on)

    thread = threading.Thread(target=run, name=IMPORT_AHEAD_THREAD, daemon=False)
    thread.start()
    return thread

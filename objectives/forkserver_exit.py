"""A forkserver exits at once when its last client ends, instead of tearing torch down.

Preloaded last by the two forkservers: the trials' (search/trial/isolate.py) and a trial's DDP ranks'
(objectives/launch.py, CUDA or more than one thread per rank). A forkserver is a template: torch
imported, no CUDA, no files, nothing to clean up; every process forked from it ends with os._exit.
When its client exits, it sees its pipe close and raises SystemExit, and Python's exit would then
finalise every module and object that torch made: 0.7-0.8 s on 2 cores. The trials' forkserver holds
the sweep's stdout and stderr, so whatever read the sweep's output to its end (a pipe, `| tee`, CI,
cron, subprocess.run) waited that long after the sweep had ended (measured); the ranks' forkserver,
orphaned when its trial ends, would spend that CPU beside the sweep's next trial (the same teardown,
not timed on its own). The exit handler registered here runs first (exit handlers run last-registered
first) and ends the process once its streams are flushed.

It registers only when imported by a forkserver's preload: imported anywhere else (a test, a tool
that imports every module) it does nothing, so no other process's exit status is ever replaced.
Standard library only, like the rest of objectives/ beside torch.
"""
from __future__ import annotations

import atexit
import os
import sys
from multiprocessing import forkserver


def preloaded_by_forkserver() -> bool:
    """Whether this module is being imported by multiprocessing's forkserver, from its preload."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False


def exit_now(pid: int) -> None:
    """In the forkserver (`pid`), flush its streams and end the process with status 0 (its exit
    status is read by no one: the sweep checks only whether it is alive); anywhere else, nothing."""
    if os.getpid() != pid:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed stream: nothing left to flush
            pass
    os._exit(0)


if preloaded_by_forkserver():
    atexit.register(exit_now, os.getpid())

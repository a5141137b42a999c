"""SIGINT and SIGTERM: the first one stops the sweep; the cleanup it starts
always finishes, and within a bound.

The first signal raises `Interrupted` where the sweep is, so that the
running trials' process trees are killed and their trials closed in Optuna
and MLflow (search/sweep/sweeper.py). Code that must not stop halfway (asking for
a trial and opening its run, launching it, telling its result) runs inside
`deferred()`: a signal that arrives there is raised when the section ends.
Every signal after the first is counted and otherwise ignored until the
process exits: a second Ctrl-C 0.2 s later (an impatient operator, or
SLURM's and Kubernetes' SIGTERM right after a Ctrl-C) used to cut the
cleanup short and leave the trial RUNNING in Optuna and in MLflow.

The cleanup is bounded instead. From the first signal on, each MLflow
request is tried once with a MLFLOW_REQUEST_TIMEOUT_S timeout (MLflow's own
retries would take about 47 s per request on a server that stopped
answering), and a watchdog thread ends the process CLEANUP_BOUND_S after the
first signal whatever it is waiting on (a study storage that stopped
answering), with the exit status the first signal asked for. Whatever that
leaves RUNNING is closed and retried by the next start (search/sweep/recovery.py).

"First" means first to arrive. Python runs the handlers of signals that are
pending together in signal-number order, SIGINT (2) before SIGTERM (15), so
a SIGTERM followed 50 ms later by a Ctrl-C, while the main thread could not
run Python (one long C call; CI's loaded machine), used to be taken for a
Ctrl-C (exit 130, the trial not retried). The arrival order comes from the wakeup fd instead, to
which Python's C-level handler writes each signal's number as it arrives.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from search.errors import Interrupted

CLEANUP_BOUND_S = 30.0
MLFLOW_REQUEST_TIMEOUT_S = 5
SIGNALS = (signal.SIGINT, signal.SIGTERM)

_first: int | None = None  # the signal that stopped the sweep
_raised = False  # whether Interrupted has been raised for it
_arrived: list[int] = []  # every SIGINT and SIGTERM so far, in the order they arrived
_handled: dict[int, int] = {}  # handler calls per signal
_wakeup_read_fd: int | None = None
_depth = 0  # nesting of deferred() sections
_signalled = threading.Event()


def install(bound_s: float = CLEANUP_BOUND_S) -> None:
    """Handle SIGINT and SIGTERM in this (main) thread from now until the process exits."""
    global _wakeup_read_fd
    read_fd, write_fd = os.pipe()
    for fd in (read_fd, write_fd):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    _wakeup_read_fd = read_fd
    for signum in SIGNALS:
        signal.signal(signum, _handler)
    threading.Thread(target=_watchdog, args=(bound_s,), name="search-interrupt-watchdog", daemon=True).start()


def ignored() -> list[int]:
    """Signals that arrived after the first one (they did not cut the cleanup short)."""
    return _arrived[1:]


def ignore_from_now() -> None:
    """Once the cleanup is done: a signal during the interpreter's shutdown would
    otherwise kill the process with it (Python gives back the default handlers
    of the signals it handles, not of those ignored), and the exit status with it."""
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextmanager
def deferred() -> Iterator[None]:
    """A section a signal does not stop halfway: it is raised when the section ends."""
    global _depth, _raised
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _first is not None and not _raised:
            _raised = True
            raise Interrupted(_first)


def _handler(signum: int, _frame: object) -> None:
    global _first, _raised
    _arrived.extend(_read_wakeup_fd())
    _handled[signum] = _handled.get(signum, 0) + 1
    if _handled[signum] > _arrived.count(signum):  # the wakeup fd was taken over by other code: handler order
        _arrived.append(signum)
    if _first is not None:
        return
    _first = _arrived[0]
    _bound_mlflow_requests()
    _signalled.set()
    if _depth == 0:
        _raised = True
        raise Interrupted(_first)


def _read_wakeup_fd() -> list[int]:
    """The SIGINTs and SIGTERMs written to the wakeup fd since the last read, in arrival order."""
    if _wakeup_read_fd is None:
        return []
    try:
        written = os.read(_wakeup_read_fd, 4096)
    except (BlockingIOError, OSError):
        return []
    return [signum for signum in written if signum in SIGNALS]


def _bound_mlflow_requests() -> None:
    """MLflow reads these for every request (mlflow.utils.rest_utils)."""
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(MLFLOW_REQUEST_TIMEOUT_S)


def _watchdog(bound_s: float) -> None:
    _signalled.wait()
    time.sleep(bound_s)
    name = signal.Signals(_first or signal.SIGTERM).name
    print(f"search: the cleanup after {name} did not end within {bound_s:g} s (the study storage or MLflow did "
          f"not answer); exiting now: the next start closes and retries the trials it left RUNNING",
          file=sys.stderr, flush=True)
    os._exit(128 + (_first or signal.SIGTERM))

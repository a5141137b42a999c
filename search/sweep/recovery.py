"""Stale trials: closing what a killed sweep left RUNNING, and retrying it.

Optuna's own heartbeat runs only inside `study.optimize` and not on journal
storage, so the sweep keeps its own: every trial it starts carries the
worker that runs it (`host:pid:process start time`, in clock ticks since
boot on Linux) and a heartbeat time it
refreshes while the trial runs. On start, a RUNNING trial is stale when its
worker is on this host and gone, or its heartbeat is older than the grace
period (a worker on another host). A stale trial is closed as failed in
Optuna and KILLED in MLflow, and its configuration is enqueued again while
it has retries left, as is a trial stopped by SIGINT or SIGTERM
(search/sweep/interrupt.py) when its sweep closes it.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Callable

import optuna
import psutil
from optuna.trial import TrialState

from search.record import (CONFIRMATION_ROLES, CRASHED, ENQUEUED_AS, HEARTBEAT_ATTR, OUTCOME_ATTR, REASON_ATTR,
                           RETRIES_ATTR, RETRY_OF_ATTR, WORKER_ATTR, role)

HEARTBEAT_INTERVAL_S = 20.0


def _started(pid: int) -> str:
    """When the process started, as a value that never changes while it runs: on Linux `t` and the clock
    ticks since boot (/proc/PID/stat). psutil's create_time() adds the boot time, which Linux derives from
    the wall clock, so it moves when the clock is stepped or slewed: a live worker compared by it could be
    taken for a gone one, and its running trial closed under it. Elsewhere, create_time() to 0.01 s."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
        return "t" + stat[stat.rindex(")") + 2:].split()[19]  # field 22, starttime, after the command name
    except (OSError, ValueError, IndexError):
        return f"{psutil.Process(pid).create_time():.2f}"


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{_started(os.getpid())}"


def worker_alive(worker: str) -> bool | None:
    """True/False for a worker on this host; None when it is elsewhere (unknowable here)."""
    host, pid, started = worker.rsplit(":", 2)
    if host != socket.gethostname():
        return None
    try:
        if started.startswith("t"):
            return _started(int(pid)) == started
        # An id written as create_time() (before the ticks, or off Linux): the wall clock may have moved since.
        return abs(psutil.Process(int(pid)).create_time() - float(started)) < 2.0
    except (psutil.NoSuchProcess, ValueError):
        return False


def stale_trials(study: optuna.Study, grace_s: float) -> list[optuna.trial.FrozenTrial]:
    stale = []
    now = time.time()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get(WORKER_ATTR)
        alive = worker_alive(worker) if worker else None
        beat = trial.user_attrs.get(HEARTBEAT_ATTR, trial.datetime_start.timestamp() if trial.datetime_start else now)
        if alive is False or (alive is None and now - beat > grace_s):
            stale.append(trial)
    return stale


def close_stale(study: optuna.Study, trial: optuna.trial.FrozenTrial, max_retries: int) -> bool | None:
    """Fail the stale trial and enqueue its configuration again if retries are left.

    Returns whether it was enqueued again, or None when another worker closed
    it first: every live worker sees the same stale trial, and only the one
    whose FAIL lands (the storage refuses to update a finished trial) retries it.
    """
    storage = study._storage
    worker = trial.user_attrs.get(WORKER_ATTR, "unknown worker")
    try:
        storage.set_trial_user_attr(trial._trial_id, OUTCOME_ATTR, CRASHED)
        storage.set_trial_user_attr(trial._trial_id, REASON_ATTR, f"the sweep running it ({worker}) was killed")
        study.tell(trial.number, state=TrialState.FAIL)
    except (optuna.exceptions.UpdateFinishedTrialError, ValueError):  # setting an attr / telling a finished trial
        return None
    return retry(study, trial, max_retries)


def retry(study: optuna.Study, trial: optuna.trial.FrozenTrial | optuna.Trial, max_retries: int) -> bool:
    """Enqueue the configuration of a trial its sweep stopped (killed, preempted,
    interrupted) while it has retries left: it measured nothing about it. The retry is
    enqueued as the trial was (search/sweep/roles.py ENQUEUED_AS): a baseline run at its seed.
    Returns whether it was enqueued; the next `ask` on the study runs it first. A confirmation's run is not:
    the next sweep confirms again from the start, and would drop it (search/sweep/roles.py drop_unrun)."""
    retries = int(trial.user_attrs.get(RETRIES_ATTR, 0))
    if retries >= max_retries or role(trial) in CONFIRMATION_ROLES:
        return False
    same = {k: v for k, v in trial.user_attrs.items() if k in ENQUEUED_AS}  # its role, its seed, ...
    study.enqueue_trial(trial.params, user_attrs={**same, RETRIES_ATTR: retries + 1, RETRY_OF_ATTR: trial.number},
                        skip_if_exists=False)
    return True


class Heartbeat:
    """Refreshes the heartbeat of the trials this worker is running, and calls `on_beat` (the worker's own
    entry on the study, search/sweep/workers.py) at each beat."""

    def __init__(self, study: optuna.Study, interval_s: float = HEARTBEAT_INTERVAL_S,
                 on_beat: Callable[[], None] = lambda: None) -> None:
        self._study = study
        self._interval_s = interval_s
        self._on_beat = on_beat
        self._trials: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="search-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def track(self, trial: optuna.Trial) -> None:
        trial.set_user_attr(WORKER_ATTR, worker_id())
        trial.set_user_attr(HEARTBEAT_ATTR, time.time())
        with self._lock:
            self._trials[trial._trial_id] = trial

    def untrack(self, trial: optuna.Trial) -> None:
        with self._lock:
            self._trials.pop(trial._trial_id, None)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            with self._lock:
                ids = list(self._trials)
            for trial_id in ids:
                try:
                    self._study._storage.set_trial_user_attr(trial_id, HEARTBEAT_ATTR, time.time())
                except (RuntimeError, ValueError):  # finished meanwhile
                    pass
            try:
                self._on_beat()
            except Exception:  # noqa: BLE001  a storage hiccup: the next beat tries again
                pass

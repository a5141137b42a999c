"""Device slots: several trials at once on one machine, one per GPU, and a
slot takes the next trial as soon as its last one ends.

Hydra's basic launcher runs a job in the sweep process and returns when the
job returns. Inside `detached_jobs()` the job (search/trial/app.py) starts the
trial's isolated child and returns it running, so every Hydra job is set up
one after another in the main thread (Hydra's HydraConfig, logging and
output directories are process-global), while the trials themselves run
concurrently in their own processes. Other launchers (joblib, submitit) run
the job elsewhere and wait for the trial there; the sweeper gives them
batches of `n_jobs` instead.

A slot is one GPU (CUDA_VISIBLE_DEVICES of the trial), or a pretend device
on a machine without one. A trial with `parallel.devices=k` takes k slots
on k different GPUs; trials share a GPU only with `trials_per_gpu` > 1.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any, Callable, Iterator, Sequence

from search.errors import BadInput
from search.sweep.interrupt import deferred

_detached = False


@contextmanager
def detached_jobs() -> Iterator[None]:
    """Jobs launched inside return their trial running instead of its result."""
    global _detached
    _detached = True
    try:
        yield
    finally:
        _detached = False


def jobs_detached() -> bool:
    return _detached


@dataclass(frozen=True)
class Slot:
    index: int
    gpu: str | None  # the GPU as the sweep's CUDA_VISIBLE_DEVICES names it; None: a slot on a machine without one


def make_slots(setting: Any, trials_per_gpu: int, gpu_count: int) -> list[Slot]:
    """`setting` is hydra.sweeper.slots: `auto` (one per GPU, or 1 without a GPU) or a count."""
    if not isinstance(trials_per_gpu, int) or trials_per_gpu < 1:
        raise BadInput(f"hydra.sweeper.trials_per_gpu must be an integer >= 1; got {trials_per_gpu!r}; "
                       f"fix: hydra.sweeper.trials_per_gpu=1 (trials never share a GPU)")
    most = gpu_count * trials_per_gpu
    if setting == "auto":
        count = most or 1
    elif isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        count = setting
    else:
        raise BadInput(f"hydra.sweeper.slots must be auto or an integer >= 1; got {setting!r}; "
                       f"fix: hydra.sweeper.slots=auto (one trial per GPU)")
    if gpu_count == 0:
        return [Slot(i, None) for i in range(count)]
    if count > most:
        raise BadInput(f"hydra.sweeper.slots must be at most the visible GPUs x trials_per_gpu ({gpu_count} x "
                       f"{trials_per_gpu}); got {count}; fix: hydra.sweeper.slots=auto, or "
                       f"hydra.sweeper.trials_per_gpu={-(-count // gpu_count)} to let trials share a GPU")
    names = _visible_gpu_names(gpu_count)
    return [Slot(i, names[i % gpu_count]) for i in range(count)]  # slot i and i+gpu_count share a GPU


def _visible_gpu_names(gpu_count: int) -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    names = [v.strip() for v in visible.split(",") if v.strip()] if visible else []
    return names[:gpu_count] if len(names) >= gpu_count else [str(i) for i in range(gpu_count)]


def take(free: Sequence[Slot], count: int) -> list[Slot] | None:
    """`count` free slots on different GPUs (the lowest first), or None while too few are free."""
    taken: list[Slot] = []
    for slot in sorted(free, key=lambda s: s.index):
        if slot.gpu is None or slot.gpu not in {t.gpu for t in taken}:
            taken.append(slot)
        if len(taken) == count:
            return taken
    return None


def cuda_visible_devices(taken: Sequence[Slot]) -> str | None:
    gpus = [s.gpu for s in taken if s.gpu is not None]
    return ",".join(gpus) if gpus else None


@dataclass
class Launch:
    """A trial the sweeper proposed: what it is, and how many slots it takes."""

    trial: Any
    overrides: list[str]
    devices: int  # parallel.devices of its config: the slots it takes
    job_config: Any = None  # the Hydra job config composed from `overrides`
    config: Any = None  # that config parsed (objectives.TrialConfig); None: a user's app, or a config the parser refused


def run(slots: Sequence[Slot], budget: int, propose: Callable[[], Launch | None],
        start: Callable[[Launch, list[Slot]], Any], finish: Callable[[Launch, Any], bool],
        abort: Callable[[Launch, BaseException], None]) -> None:
    """Keep every slot busy until `budget` trials have been proposed and have ended.

    propose() -> the next trial, or None when there is none (a used-up grid);
    start(launch, slots) -> a running trial (search.isolate.RunningTrial) or, when it
    could not start, its result dict; finish(launch, result) -> whether to stop
    proposing (the failure policy gave up); abort(launch, error) closes a trial
    the sweep stops without a result (Ctrl-C, SIGTERM: search/sweep/interrupt.py), after
    every running trial's process tree was killed."""
    free = list(slots)
    running: list[tuple[Launch, list[Slot], Any]] = []
    waiting: Launch | None = None
    proposed, stop = 0, False
    try:
        while True:
            while waiting is not None or not stop:  # a trial already asked for runs even after a stop
                if waiting is None:
                    if not free:
                        break  # ask only when a slot is free: the sampler then knows every result so far
                    with deferred():  # a trial asked for is always known here, so a signal can close it
                        waiting = propose() if proposed < budget else None
                    if waiting is None:
                        stop = True
                        break
                    proposed += 1
                taken = take(free, min(waiting.devices, len(slots)))
                if taken is None:
                    break  # the next trial needs more slots than are free: wait for one to end
                free = [s for s in free if s not in taken]
                with deferred():  # likewise a started one, and its process tree
                    handle = start(waiting, taken)
                    launch, waiting = waiting, None
                    if not isinstance(handle, dict):
                        running.append((launch, taken, handle))
                    else:
                        free += taken
                        stop = finish(launch, handle) or stop
            if not running:
                break
            wait([h.sentinel for _, _, h in running], timeout=min(h.seconds_left() for _, _, h in running))
            for entry in [e for e in running if e[2].done()]:
                with deferred():  # a trial that ended is told, not closed as interrupted
                    running.remove(entry)
                    launch, taken, handle = entry
                    free += taken
                    stop = finish(launch, handle.wait()) or stop
    except BaseException as err:
        for _, _, handle in running:  # every process tree first: they all stop now, whatever closing them takes
            handle.kill()
        for launch in [launch for launch, _, _ in running] + ([waiting] if waiting is not None else []):
            try:
                abort(launch, err)
            except Exception as failed:  # the storage refused: the next start closes it as stale
                print(f"search: could not close trial {launch.trial.number} ({type(failed).__name__}: {failed}); "
                      f"the next start closes it", file=sys.stderr, flush=True)
        raise

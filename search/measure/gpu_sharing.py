"""Trials on the same GPU at the same time: NVML reads a GPU, not a process.

With `hydra.sweeper.trials_per_gpu` > 1 two trials can run on one GPU at
once. Its power, energy and utilisation are then both trials' together, and
a trial's energy per sample would count its neighbour's work too. Every GPU
sampler of this process (one per isolated trial, search/measure/gpu_telemetry.py)
records which GPUs it samples, from its start to its end; a trial whose timed
windows overlapped another trial's time on one of its GPUs gets no energy,
power or utilisation figures, and `gpu_telemetry_note` says why. A sweep that
scores one of those figures refuses `trials_per_gpu` > 1 before it starts
(search/sweep/planning.py).

Conservative: another trial counts from its sampler's start, while it still
imports torch or compiles. Limited to this process: trials of other
processes on the same GPU (another sweep on the box, a launcher that runs
trials in its own workers) are not seen.
"""
from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

# the figures a trial that shared its GPU goes without (search/measure/gpu_telemetry.py summary), by prefix
LEFT_OUT_WHEN_SHARED = ("energy_", "gpu_power", "gpu_util", "gpu_mem_util")

_keys = itertools.count()
_lock = threading.Lock()  # samplers start and end on the sweep's main thread today; a threaded launcher would not


@dataclass
class _Stay:
    gpus: frozenset[int]  # NVML indices
    start_unix_s: float
    end_unix_s: float | None = None  # None: still running


_stays: dict[int, _Stay] = {}


def arrive(gpus: Iterable[int]) -> int:
    """A trial starts sampling `gpus` now; its key for `leave`."""
    with _lock:
        _forget_finished()
        key = next(_keys)
        _stays[key] = _Stay(frozenset(gpus), time.time())
    return key


@dataclass(frozen=True)
class Overlap:
    """Another trial's time on some of this trial's GPUs, within this trial's stay."""

    gpus: frozenset[int]
    start_unix_s: float
    end_unix_s: float


def leave(key: int) -> list[Overlap]:
    """Trial `key` stops sampling now: the other trials that ran on its GPUs during its stay (a trial still
    running counts until now). Its own stay is kept for the trials still running beside it."""
    with _lock:
        me = _stays.get(key)
        if me is None or me.end_unix_s is not None:
            return []
        me.end_unix_s = now = time.time()
        overlaps = []
        for other_key, other in _stays.items():
            common = me.gpus & other.gpus
            end = other.end_unix_s if other.end_unix_s is not None else now
            if other_key != key and common and end > me.start_unix_s:
                overlaps.append(Overlap(common, other.start_unix_s, end))
    return overlaps


def neighbours(overlaps: Sequence[Overlap], intervals: Sequence[tuple[float, float]]) -> list[int]:
    """The GPUs on which another trial ran during any of `intervals` (unix seconds)."""
    shared: set[int] = set()
    for other in overlaps:
        if any(other.start_unix_s < t1 and other.end_unix_s > t0 for t0, t1 in intervals):
            shared |= other.gpus
    return sorted(shared)


def note(gpus: Sequence[int]) -> str:
    return (f"another trial ran on GPU {', '.join(map(str, gpus))} during this trial's timed windows "
            f"(hydra.sweeper.trials_per_gpu > 1): NVML's power, energy and utilisation are the GPU's, not this "
            f"trial's, so they are left out; fix: hydra.sweeper.trials_per_gpu=1")


def _forget_finished() -> None:
    """Stays that ended before every running trial started can overlap none of them."""
    oldest = min((s.start_unix_s for s in _stays.values() if s.end_unix_s is None), default=time.time())
    for key in [k for k, s in _stays.items() if s.end_unix_s is not None and s.end_unix_s < oldest]:
        del _stays[key]

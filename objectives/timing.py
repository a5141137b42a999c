"""Honest throughput: burn-in steps, then windows of steps, median over windows.

The loop never reads a training tensor on the host between window edges (a
read waits for the GPU and, under DDP, adds an all-reduce), so there are no
per-step times: the clock is read at edges only, each time just after a
device synchronize, and the time between two such reads is a ``Span`` of
whole steps. Edges are the first step (compilation), the end of warm-up,
every window's end and the last step; an evaluation pause (time to
accuracy, early stopping's learning curve) closes a span before it and opens
one after it, so a window's time is the sum of its spans and never contains
an evaluation. Spans include waiting for the DataLoader: throughput is end
to end.

The loader's restart at an epoch end (a non-persistent loader's workers shut
down and start again, and the new epoch's first batches are loaded) falls in
a minority of windows when an epoch is longer than a window, and the median
would drop it: a real training run pays it once per epoch. So each window's
time has its own restarts taken out and the run's mean restart, spread over
an epoch's steps, put in (``restart_s_per_step``): the windows' median is
then the end-to-end rate of a run of many epochs (measured, docs/BENCHMARKS.md
"Epoch restarts": two non-persistent loader workers read 1.107x the timed
span's rate by the plain median, 0.984x charged).
A run that saw no epoch end is charged one restart timed after its last
step (objectives/train.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any


@dataclass
class Span:
    """Steps ``first_step``..``last_step`` (counted from 1) between two synchronised clock reads."""

    first_step: int
    last_step: int
    seconds: float  # perf_counter difference
    start_unix_s: float  # time.time() at the same reads, for the GPU energy intervals
    end_unix_s: float
    data_wait_s: float  # spent waiting for the next batch
    restart_s: float = 0.0  # of which restarting the loader at epoch ends (shut down, start, first batch)
    restarts: int = 0  # epoch ends in these steps

    @property
    def steps(self) -> int:
        return self.last_step - self.first_step + 1


@dataclass
class WindowPlan:
    warmup_steps: int
    window_steps: int
    windows: int


def throughput_only_steps(train: Any, budget_steps: int) -> int:
    """A throughput-only trial (``train.throughput_only``): the warm-up and whole windows covering
    ``train.probe_steps``, at least 3 of them (a median needs them), within the budget's steps."""
    windows = max(3, math.ceil(train.probe_steps / train.window_steps))
    return min(budget_steps, train.warmup_steps + windows * train.window_steps)


def plan_windows(
    total_steps: int, warmup_steps: int, window_steps: int, min_windows: int = 3, min_warmup_steps: int = 0
) -> WindowPlan:
    """Shrink warm-up (never below ``min_warmup_steps``), then window size, until ``min_windows`` windows fit."""
    warmup = min(warmup_steps, max(min_warmup_steps, total_steps - min_windows))
    window = max(1, min(window_steps, (total_steps - warmup) // min_windows))
    return WindowPlan(warmup, window, max(0, (total_steps - warmup) // window))


def window_spans(spans: list[Span], plan: WindowPlan) -> list[list[Span]]:
    """The spans of each planned window that ran to its end, in order (a stopped trial's last window may not)."""
    out = []
    for i in range(plan.windows):
        lo = plan.warmup_steps + i * plan.window_steps + 1
        inside = [s for s in spans if lo <= s.first_step and s.last_step < lo + plan.window_steps]
        if sum(s.steps for s in inside) != plan.window_steps:
            break
        out.append(inside)
    return out


def window_times_s(spans: list[Span], plan: WindowPlan, restart_s_per_step: float | None = None) -> list[float]:
    """Each complete window's training time: its spans' sum, evaluation pauses left out; with
    ``restart_s_per_step``, its own loader restarts replaced by that share per step (0: left out)."""
    if restart_s_per_step is None:
        return [sum(s.seconds for s in window) for window in window_spans(spans, plan)]
    return [sum(s.seconds - s.restart_s for s in window) + restart_s_per_step * plan.window_steps
            for window in window_spans(spans, plan)]


def restart_s_per_step(spans: list[Span], steps_per_epoch: float | None,
                       untimed_restart_s: float | None = None) -> float:
    """The loader's mean restart at an epoch end (those in the spans, or the one timed after a run that saw
    none), spread over an epoch's steps; 0 when there is none or the epoch's length is unknown (a dataset
    without a length)."""
    seconds, count = sum(s.restart_s for s in spans), sum(s.restarts for s in spans)
    if not count and untimed_restart_s is not None:
        seconds, count = untimed_restart_s, 1
    if not count or not steps_per_epoch:
        return 0.0
    return seconds / count / steps_per_epoch


def timed_intervals_unix_s(spans: list[Span], plan: WindowPlan) -> list[tuple[float, float]]:
    """Wall-clock intervals of the complete windows' spans: where the GPU energy of the scored steps lies."""
    return [(s.start_unix_s, s.end_unix_s) for window in window_spans(spans, plan) for s in window]


def throughput_summary(window_times: list[float], plan: WindowPlan, global_batch: int) -> dict[str, float]:
    """Median and coefficient of variation of per-window samples/s, and step-time percentiles.

    Steps are not timed one by one (that needs a host sync per step): the
    step-time percentiles are over the windows' mean step times."""
    per_window = [plan.window_steps * global_batch / t for t in window_times]
    if not per_window:
        return {"throughput_windows": 0.0}
    mean = statistics.fmean(per_window)
    cv = statistics.pstdev(per_window) / mean if len(per_window) > 1 else 0.0
    ms = sorted(t * 1000 / plan.window_steps for t in window_times)
    return {
        "throughput_samples_per_s": statistics.median(per_window),
        "throughput_cv": cv,
        "throughput_windows": float(len(per_window)),
        "throughput_window_steps": float(plan.window_steps),
        "throughput_warmup_steps": float(plan.warmup_steps),
        "step_time_p50_ms": _percentile(ms, 50),
        "step_time_p95_ms": _percentile(ms, 95),
    }


INPUT_BOUND_FRACTION = 0.3  # of step time spent waiting for the next batch


def input_summary(spans: list[Span], plan: WindowPlan) -> dict[str, float]:
    """How much of the timed windows' time went to waiting for the DataLoader: the
    "CPU is the bottleneck" case that more workers or GPU-side augmentation fix."""
    timed = [s for window in window_spans(spans, plan) for s in window]
    seconds = sum(s.seconds for s in timed)
    if seconds <= 0:
        return {}
    fraction = sum(s.data_wait_s for s in timed) / seconds
    return {"data_wait_fraction": fraction, "input_bound": float(fraction > INPUT_BOUND_FRACTION)}


def _percentile(sorted_values: list[float], q: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)

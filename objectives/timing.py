"""Honest throughput: burn-in steps, then windows of steps, median over windows.

Step times are wall-clock from the end of one step to the end of the next,
so they include waiting for the DataLoader. The loss is read back every step
(to stop on divergence), which also synchronises the device at every window
edge.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass
class WindowPlan:
    warmup_steps: int
    window_steps: int
    windows: int


def plan_windows(
    total_steps: int, warmup_steps: int, window_steps: int, min_windows: int = 3, min_warmup_steps: int = 0
) -> WindowPlan:
    """Shrink warm-up (never below ``min_warmup_steps``), then window size, until ``min_windows`` windows fit."""
    warmup = min(warmup_steps, max(min_warmup_steps, total_steps - min_windows))
    window = max(1, min(window_steps, (total_steps - warmup) // min_windows))
    return WindowPlan(warmup, window, max(0, (total_steps - warmup) // window))


def throughput_summary(step_times_s: list[float], plan: WindowPlan, global_batch: int) -> dict[str, float]:
    """Median and coefficient of variation of per-window samples/s, and step-time percentiles."""
    timed = step_times_s[plan.warmup_steps :]
    per_window = [
        plan.window_steps * global_batch / sum(timed[i * plan.window_steps : (i + 1) * plan.window_steps])
        for i in range(len(timed) // plan.window_steps)
    ]
    if not per_window:
        return {"throughput_windows": 0.0}
    mean = statistics.fmean(per_window)
    cv = statistics.pstdev(per_window) / mean if len(per_window) > 1 else 0.0
    ms = sorted(t * 1000 for t in timed)
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


def input_summary(step_times_s: list[float], data_wait_s: list[float], plan: WindowPlan) -> dict[str, float]:
    """How much of the timed step time went to waiting for the DataLoader: the
    "CPU is the bottleneck" case that more workers or GPU-side augmentation fix."""
    steps = plan.windows * plan.window_steps
    timed = sum(step_times_s[plan.warmup_steps : plan.warmup_steps + steps])
    if timed <= 0:
        return {}
    fraction = sum(data_wait_s[plan.warmup_steps : plan.warmup_steps + steps]) / timed
    return {"data_wait_fraction": fraction, "input_bound": float(fraction > INPUT_BOUND_FRACTION)}


def _percentile(sorted_values: list[float], q: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)

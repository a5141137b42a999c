"""GPU energy over a trial's timed windows, and whether NVML's readings can tell it.

The trial reports the wall-clock intervals of its timed windows (unix
seconds, evaluation pauses left out: objectives/timing.py); the sampler
reads each GPU every 0.2 s. On a GPU a digits window lasts milliseconds, so
an interval rarely holds a reading of its own: energy comes from readings
either side of it, and that is only trustworthy when the intervals add up
to enough time. The rule, checked per trial (`insufficiency`):

- every GPU has a reading at or before the first interval and at or after
  the last one (sampling covered the timed part; an NVML error ends it);
- the timed time T (the intervals' sum) is at least 1 s: NVML's power
  reading on Ampere and later (but GA100) is a 1 s average, and its
  utilisation an average over up to 1 s;
- every GPU has at least 5 readings inside the intervals, for the means;
- the energy counter is read between readings, by linear interpolation,
  and wherever power changed between two readings that is off by up to
  (power swing) x (a quarter of the reading gap) at each end of the timed
  part and (power swing) x min(pause, half the reading gap) across each
  pause between intervals; that interpolated time U must be at most 10% of T.

A trial that fails it gets no energy, power or utilisation figures and a
`gpu_telemetry_note` saying which part failed and how to fix it.

Energy is the driver's cumulative counter (nvmlDeviceGetTotalEnergyConsumption)
differenced over each interval, or, without one, power integrated over the
intervals (instant power where NVML offers it, else the averaged reading);
the source is recorded. Where NVML offers instant power (field
NVML_FI_DEV_POWER_INSTANT) it is also integrated on its own and its ratio to
the counter recorded as a cross-check. None of this has run on a GPU yet:
it is tested with NVML faked at search.nvml's one seam.
"""
from __future__ import annotations

from typing import Callable, Sequence

from search.measure.nvml import GpuReading

MIN_TIMED_S = 1.0
MIN_READINGS = 5
MAX_INTERPOLATED_SHARE = 0.1
FIX = ("fix: more timed steps (train.budget_samples, train.window_steps) or fewer evaluation pauses "
       "(train.eval_every_samples)")

Interval = tuple[float, float]


def insufficiency(by_gpu: dict[int, list[GpuReading]], intervals: Sequence[Interval]) -> str | None:
    """Why these readings cannot give energy and means over `intervals` (one line), or None when they can.
    `by_gpu` holds each GPU's readings sorted by time; `intervals` are sorted and disjoint."""
    if not intervals:
        return "the trial reported no timed window, so there is nothing to measure energy over"
    timed_s = sum(t1 - t0 for t0, t1 in intervals)
    first, last = intervals[0][0], intervals[-1][1]
    for index, readings in by_gpu.items():
        if readings[0].time_unix_s > first or readings[-1].time_unix_s < last:
            return (f"GPU energy and utilisation need readings of every GPU before and after the timed windows; "
                    f"GPU {index} was read from {readings[0].time_unix_s:.2f} to {readings[-1].time_unix_s:.2f}, "
                    f"the windows ran from {first:.2f} to {last:.2f} (unix s)")
    if timed_s < MIN_TIMED_S:
        return (f"GPU energy and utilisation need timed windows of >= {MIN_TIMED_S:g} s in all (NVML averages "
                f"power over 1 s); got {timed_s:.3g} s in {len(intervals)} intervals; {FIX}")
    for index, readings in by_gpu.items():
        inside = sum(1 for r in readings if _inside(r.time_unix_s, intervals))
        if inside < MIN_READINGS:
            return (f"GPU energy and utilisation need >= {MIN_READINGS} readings of each GPU inside the timed "
                    f"windows; GPU {index} has {inside} in {timed_s:.3g} s; {FIX}")
    interpolated_s = max(interpolated_time_s([r.time_unix_s for r in readings], intervals)
                         for readings in by_gpu.values())
    if interpolated_s > MAX_INTERPOLATED_SHARE * timed_s:
        return (f"GPU energy needs the time interpolated between readings at the windows' edges and pauses to be "
                f"<= {MAX_INTERPOLATED_SHARE:.0%} of the timed time; got {interpolated_s:.3g} s of {timed_s:.3g} s "
                f"({len(intervals) - 1} pauses); {FIX}")
    return None


def interpolated_time_s(times: Sequence[float], intervals: Sequence[Interval]) -> float:
    """U of the module docstring: a quarter of the reading gap at each end of the timed part,
    min(pause, half the reading gap) across each pause. An edge that falls on a reading costs nothing."""
    total = _gap(times, intervals[0][0]) / 4 + _gap(times, intervals[-1][1]) / 4
    for (_, end), (start, _) in zip(intervals, intervals[1:]):
        total += min(start - end, (_gap(times, end) + _gap(times, start)) / 4)
    return total


def energy_j(by_gpu: dict[int, list[GpuReading]], intervals: Sequence[Interval]) -> tuple[float, str] | None:
    """(joules summed over GPUs and intervals, source), or None when no GPU figure can give it."""
    counter = _over_gpus(by_gpu, lambda r: r.energy_mj, lambda points: _counter_delta(points, intervals) / 1000.0)
    if counter is not None:
        return counter, "energy counter"
    instant = instant_power_energy_j(by_gpu, intervals)
    if instant is not None:
        return instant, "instant power x time"
    averaged = averaged_power_energy_j(by_gpu, intervals)
    return None if averaged is None else (averaged, "averaged power x time")


def averaged_power_energy_j(by_gpu: dict[int, list[GpuReading]], intervals: Sequence[Interval]) -> float | None:
    """NVML's power reading (a 1 s average on recent GPUs) integrated over the intervals."""
    return _over_gpus(by_gpu, lambda r: r.power_w, lambda points: _integral(points, intervals))


def instant_power_energy_j(by_gpu: dict[int, list[GpuReading]], intervals: Sequence[Interval]) -> float | None:
    """Instant power (NVML_FI_DEV_POWER_INSTANT) integrated over the intervals; None where a GPU lacks it."""
    return _over_gpus(by_gpu, lambda r: r.power_instant_w, lambda points: _integral(points, intervals))


def inside(readings: Sequence[GpuReading], intervals: Sequence[Interval]) -> list[GpuReading]:
    return [r for r in readings if _inside(r.time_unix_s, intervals)]


def _over_gpus(by_gpu: dict[int, list[GpuReading]], value: Callable[[GpuReading], float | None],
               over: Callable[[list[tuple[float, float]]], float]) -> float | None:
    total = 0.0
    for readings in by_gpu.values():
        points = [(r.time_unix_s, v) for r in readings if (v := value(r)) is not None]
        if not points:
            return None
        total += over(points)
    return total


def _counter_delta(points: list[tuple[float, float]], intervals: Sequence[Interval]) -> float:
    return sum(_interpolate(points, t1) - _interpolate(points, t0) for t0, t1 in intervals)


def _integral(points: list[tuple[float, float]], intervals: Sequence[Interval]) -> float:
    """Integral over the intervals of the piecewise-linear curve through `points` (flat beyond its ends)."""
    total = 0.0
    for t0, t1 in intervals:
        cuts = [t0, *(t for t, _ in points if t0 < t < t1), t1]
        total += sum((b - a) * (_interpolate(points, a) + _interpolate(points, b)) / 2 for a, b in zip(cuts, cuts[1:]))
    return total


def _interpolate(points: list[tuple[float, float]], t: float) -> float:
    """Value at time t from the readings either side (clamped at the ends)."""
    if t <= points[0][0]:
        return points[0][1]
    for (ta, va), (tb, vb) in zip(points, points[1:]):
        if ta <= t <= tb:
            return va if tb == ta else va + (vb - va) * (t - ta) / (tb - ta)
    return points[-1][1]


def _gap(times: Sequence[float], t: float) -> float:
    """Length of the gap between the readings either side of t; 0 when t falls on a reading."""
    before = max((x for x in times if x <= t), default=None)
    after = min((x for x in times if x >= t), default=None)
    if before is None or after is None:
        return float("inf")
    return after - before


def _inside(t: float, intervals: Sequence[Interval]) -> bool:
    return any(t0 <= t <= t1 for t0, t1 in intervals)

"""What else differed between the two nights' compared runs of the incumbent, shown next to the regression
verdict so that an operator can tell "the code got slower" from "the machine was busier".

The verdict's statistics are left as they are (throughput is not re-normalised by load); these are the
evidence beside them, from figures every trial records already:
- the model's forward FLOPs per sample (`flops_per_sample`): any change is a change of the model (code or
  configuration), never noise, so the two nights did not run the same maths;
- the share of the machine the runs got: `cpu_util_percent_mean` (percent of one core, summed over the trial's
  process tree) and, where it was recorded, `gpu_util_percent_mean`. Shown when their medians moved by at least
  UTIL_MIN_MOVE_FRACTION of the earlier night's value and UTIL_MIN_MOVE_POINTS percentage points: a paced or
  I/O-bound run's few percent wobble by more than a fraction, a busy run's by fewer than ten points.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from search.reports.choose import Candidate

CONDITIONS_MOVED_TAG = "search.nightly.conditions_moved"  # on the parent run: flops_per_sample,cpu_util_... | none
FLOPS_METRIC = "flops_per_sample"
UTIL_METRICS = {"cpu_util_percent_mean": "CPU share (median cpu_util_percent_mean, % of one core)",
                "gpu_util_percent_mean": "GPU utilisation (median gpu_util_percent_mean, %)"}
# A share is what the runs got AND what they asked for: a drop is a busier machine or more waiting in the code.
LESS_UTIL_WHY = {"cpu_util_percent_mean": "the runs got less CPU tonight (a busier machine, fewer cores or threads) "
                                          "or waited more (I/O, locks, sleeps in the code)",
                 "gpu_util_percent_mean": "the GPU was busy less of the time tonight (the runs waited more on the "
                                          "CPU, data or another tenant)"}
MORE_UTIL_WHY = {"cpu_util_percent_mean": "the runs got more CPU tonight (a quieter machine than the night before, "
                                          "more threads) or spun more",
                 "gpu_util_percent_mean": "the GPU was busy more of the time tonight"}
UTIL_MIN_MOVE_FRACTION = 0.20  # of the earlier night's median
UTIL_MIN_MOVE_POINTS = 10.0  # percentage points
FLOPS_SAME_FRACTION = 1e-9  # counted FLOPs are exact: only float rounding in a median is "the same"


@dataclass
class Difference:
    metric: str
    before: float  # median over the earlier night's compared runs
    tonight: float  # median over tonight's compared runs
    moved: bool  # past this metric's threshold: shown as a line of its own

    @property
    def change_fraction(self) -> float:
        return self.tonight / self.before - 1 if self.before else math.nan


def _median(c: Candidate, metric: str) -> float | None:
    values = [v for v in c.values(metric) if math.isfinite(v)]
    return statistics.median(values) if values else None


def _flops_moved(before: float, tonight: float) -> bool:
    return abs(tonight - before) > FLOPS_SAME_FRACTION * max(abs(before), abs(tonight))


def _util_moved(before: float, tonight: float) -> bool:
    points = abs(tonight - before)
    return points >= UTIL_MIN_MOVE_POINTS and points >= UTIL_MIN_MOVE_FRACTION * abs(before)


def differences(before: Candidate, tonight: Candidate) -> list[Difference]:
    """Each condition both nights' compared runs recorded, with whether it moved past its threshold."""
    out = []
    for metric, moved in ((FLOPS_METRIC, _flops_moved), *((m, _util_moved) for m in UTIL_METRICS)):
        was, now = _median(before, metric), _median(tonight, metric)
        if was is not None and now is not None:
            out.append(Difference(metric, was, now, moved(was, now)))
    return out


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def lines(found: list[Difference]) -> list[str]:
    """One report line per condition that moved; one line saying what did not, when none did."""
    out = []
    for d in (d for d in found if d.moved):
        figures = f"{_fmt(d.before)} -> {_fmt(d.tonight)} ({d.change_fraction:+.0%})"
        if d.metric == FLOPS_METRIC:
            out.append(f"model FLOPs per sample changed: {figures}: the model itself changed (code or "
                       f"configuration, not noise); the two nights did not run the same maths")
        else:
            why = (LESS_UTIL_WHY if d.tonight < d.before else MORE_UTIL_WHY)[d.metric]
            out.append(f"{UTIL_METRICS[d.metric]}: {figures}: {why}; shown past a {UTIL_MIN_MOVE_FRACTION:.0%} "
                       f"and {UTIL_MIN_MOVE_POINTS:g}-point move")
    if found and not out:
        same = "; ".join(f"{d.metric} {_fmt(d.before)} -> {_fmt(d.tonight)}" for d in found)
        out.append(f"nothing else moved between the compared runs ({same})")
    return out


def run_figures(found: list[Difference]) -> tuple[dict[str, str], dict[str, float]]:
    """MLflow tags and metrics for the night's parent run: which conditions moved (`none` when none did), and
    both nights' medians of each, to chart beside the verdict. Nothing when neither night recorded any."""
    if not found:
        return {}, {}
    moved = ",".join(d.metric for d in found if d.moved) or "none"
    metrics = {}
    for d in found:
        metrics[f"nightly_incumbent_{d.metric}_before"] = d.before
        metrics[f"nightly_incumbent_{d.metric}_tonight"] = d.tonight
    return {CONDITIONS_MOVED_TAG: moved}, metrics


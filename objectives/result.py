"""What a trial hands back to the sweep.

Plain data that survives a pipe and a JSON file: the parent process decides
oom/timeout/crashed outcomes itself, so a trial only ever reports "ok",
"diverged" or "stopped_early" (early stopping ended it), plus its metrics
(numbers with units in their names) and info (strings such as the dtype
actually used), plus the wall-clock intervals of its timed windows for the
GPU energy integration (search/measure/gpu_energy.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

THROUGHPUT_WARNING = "throughput_warning"  # info: the line saying a budget too small left no warm-up before timing
NOT_APPLIED_WARNING = "knobs_not_applied_warning"  # info: the line naming the knobs a workload does not apply, and why
WARNINGS = (NOT_APPLIED_WARNING, THROUGHPUT_WARNING)  # info lines run_trial says on stderr (a sweep: once each)


@dataclass
class TrialResult:
    outcome: str
    metrics: dict[str, float] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    timed_windows_unix_s: list[list[float]] = field(default_factory=list)  # [start, end] per timed span

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrialResult":
        return cls(
            outcome=str(d["outcome"]),
            metrics={str(k): float(v) for k, v in d.get("metrics", {}).items()},
            info={str(k): str(v) for k, v in d.get("info", {}).items()},
            reason=str(d.get("reason", "")),
            timed_windows_unix_s=[[float(t0), float(t1)] for t0, t1 in d.get("timed_windows_unix_s", [])],
        )

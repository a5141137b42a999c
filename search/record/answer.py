"""The answer as the study stores it (keys.ANSWER_ATTR): the Answer, the contenders it was picked from, and
the paired Ratio its speedup and 95% interval are; search/sweep/answer.py picks it, search/sweep/confirm.py
measures it, and the terminal, MLflow, export and nightly read it.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

THROUGHPUT = "throughput_samples_per_s"
ACCURACY = "val_accuracy"
MEMORY_METRICS = ("cuda_peak_allocated_bytes", "peak_pss_tree_bytes", "peak_rss_bytes")

# Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (beyond: the normal's 1.96).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(dof: int) -> float:
    return _T975[dof - 1] if 1 <= dof <= len(_T975) else 1.96


@dataclass
class Ratio:
    """A paired ratio over rounds: its geometric mean and 95% interval."""

    estimate: float
    low: float
    high: float
    rounds: int

    @classmethod
    def of(cls, numerators: Sequence[float], denominators: Sequence[float]) -> Ratio | None:
        logs = [math.log(a / b) for a, b in zip(numerators, denominators) if a > 0 and b > 0]
        if not logs:
            return None
        mean = statistics.fmean(logs)
        if len(logs) < 2:
            return cls(math.exp(mean), 0.0, math.inf, 1)
        half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        return cls(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    def text(self) -> str:
        return f"{self.estimate:.2f}x (95% CI {self.low:.2f}-{self.high:.2f}, {self.rounds} rounds)"


@dataclass
class Contender:
    params: dict[str, Any]
    throughput: float  # median over its trials in the search
    val_accuracy: float | None
    devices: int = 1
    peak_memory_bytes: float = math.inf
    trials: list[int] = field(default_factory=list)
    # Your configuration's maths with speed-only knobs moved (search/sweep/staging.py): at your accuracy by
    # construction; its own whole runs are other draws of the same training (another worker's augmentation stream).
    your_maths: bool = False


@dataclass
class Answer:
    """What the sweep concludes; stored on the study (ANSWER_ATTR) and shown by the terminal, MLflow, export."""

    params: dict[str, Any]
    overrides: list[str]
    is_baseline: bool
    speedup: float
    ci_low: float
    ci_high: float
    rounds: int
    val_accuracy: float | None
    baseline_val_accuracy: float | None
    tolerance: float
    seed_check: dict[str, Any] | None = None  # {"seed", "val_accuracy", "baseline_val_accuracy" (at that seed),
    #                                            "mean_val_accuracy", "baseline_mean_val_accuracy" (both seeds), "passed",
    #                                            "your_maths" when your runs stand for it: search/sweep/confirm.py)
    tied_with: list[dict[str, Any]] = field(default_factory=list)
    rule: str = ""
    note: str = ""
    trials: list[int] = field(default_factory=list)
    baseline_trials: list[int] = field(default_factory=list)
    confirm_wall_s: float = 0.0
    search_wall_s: float = 0.0
    # contenders within noise of the search's fastest that the budget left out: {"params", "overrides",
    # "search_speedup" (their search median over your configuration's, confirm.throughput_of: the front table's `vs base`),
    # "trials"}; not shown to be slower than the answer, only not measured again
    not_confirmed: list[dict[str, Any]] = field(default_factory=list)
    your_maths: bool = False  # your configuration's maths, speed-only knobs moved (Contender.your_maths)
    # when the answer is your configuration: the fastest by its estimate of the contenders the rounds measured (a
    # next in line and one confirmed instead among them), {"params", "overrides", "speedup", "ci_low", "ci_high",
    # "rounds"}, so MLflow and export show what was confirmed not to beat it
    fastest_contender: dict[str, Any] | None = None
    # the rounds the confirmation ran in all (search.confirm_round 1..n): `rounds` are those of the answer's own
    # speedup (0 for your configuration), fewer after a next in line or one confirmed instead; None: stored before
    confirm_rounds: int | None = None
    # the rules of hydra.sweeper.constraints your configuration breaks, with its figures: the answer is then the
    # fastest configuration that meets them, faster than yours or not; '' when yours meets them
    baseline_breaks: str = ""
    # when its confirmation ended and the worker that ran it (search/sweep/recovery.py worker_id); None: stored before
    confirmed_unix_s: float | None = None
    confirmed_by: str = ""
    # another worker's answer, confirmed while this one searched, that this worker's trials since cannot change
    # (search/sweep/confirm.py standing_answer): shown and tagged on this worker's sweep run, not stored again
    standing: bool = False
    # why the search proposed no more trials and how to search on from there (search/sweep/trial_loop.py search_on);
    # '' for an answer stored before it was said
    search_ended: str = ""

    def rounds_run(self) -> int:
        """The rounds the confirmation ran; for an answer stored before they were counted, the most it shows."""
        if self.confirm_rounds is not None:
            return self.confirm_rounds
        return max(self.rounds, int((self.fastest_contender or {}).get("rounds", 0)))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("speedup", "ci_low", "ci_high"):
            if not math.isfinite(out[key]):
                out[key] = None
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Answer:
        d = dict(d)
        for key in ("speedup", "ci_low", "ci_high"):
            d[key] = math.inf if d.get(key) is None else d[key]
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

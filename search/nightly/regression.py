"""Is tonight's throughput of a configuration lower than an earlier night's,
beyond the noise the repeats measured?

Test: one-sided Welch's t-test on the logarithm of throughput (tonight less
than before), at significance `alpha`, AND a median drop of at least
`min_drop`. Why these:
- Logarithms, because a slowdown is a ratio; Welch, because the two nights'
  spreads differ (another load, another driver), and a t-test, because with
  3-5 repeats a rank test cannot reach a small p-value at all (Mann-Whitney
  with 3 against 3 bottoms out at p = 0.05).
- The minimum drop, because on a quiet machine repeats agree to a fraction of
  a percent and the t-test alone would flag a 0.3% change nobody acts on.
With one earlier measurement only, tonight's repeats are tested against it
as a fixed value (one-sample t-test), the same thresholds.
"""
from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass
from typing import Sequence


@dataclass
class Verdict:
    regressed: bool
    tested: bool
    change: float  # tonight's median / baseline median - 1 (negative: slower)
    p_value: float
    n_tonight: int
    n_before: int
    why: str


def compare(tonight: Sequence[float], before: Sequence[float], alpha: float, min_drop: float) -> Verdict:
    tonight = [v for v in tonight if v > 0 and math.isfinite(v)]
    before = [v for v in before if v > 0 and math.isfinite(v)]
    if not before:
        return Verdict(False, False, math.nan, math.nan, len(tonight), 0,
                       "no earlier measurement of this configuration on this hardware")
    if not tonight:
        return Verdict(False, False, math.nan, math.nan, 0, len(before),
                       "not measured tonight (its knob values left the search space, or every repeat failed)")
    change = statistics.median(tonight) / statistics.median(before) - 1
    if len(tonight) < 2:
        return Verdict(False, False, change, math.nan, len(tonight), len(before),
                       "fewer than 2 measurements tonight: no test")
    log_now, log_before = [math.log(v) for v in tonight], [math.log(v) for v in before]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # identical repeats: "catastrophic cancellation"
        test, p = _one_sided_p(log_now, log_before)
    p = float(p) if math.isfinite(p) else (0.0 if change < 0 else 1.0)  # zero spread on both sides
    regressed = p < alpha and -change >= min_drop
    why = (f"median {change:+.1%} ({len(tonight)} repeats tonight vs {len(before)} before), "
           f"one-sided {test} p={p:.3g}; regression needs p < {alpha:g} and a drop of at least {min_drop:.0%}")
    return Verdict(regressed, True, change, p, len(tonight), len(before), why)


def _one_sided_p(log_now: list[float], log_before: list[float]) -> tuple[str, float]:
    from scipy import stats  # here: every sweep imports this module (its hooks), and scipy.stats takes ~1 s

    if len(log_before) >= 2:
        return "Welch", stats.ttest_ind(log_now, log_before, equal_var=False, alternative="less").pvalue
    return "one-sample t-test", stats.ttest_1samp(log_now, log_before[0], alternative="less").pvalue

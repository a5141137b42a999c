"""The answer: the fastest configuration at the baseline's accuracy, with its speedup and a 95% interval.

Pure arithmetic on trials; search/sweep/confirm.py runs the measurements.

- **Eligible**: a configuration whose trials ended ok, met the user's
  constraints and whose median val_accuracy (at the study's seed) is at least
  the baseline's minus `hydra.sweeper.accuracy_tolerance`.
- **Speedup**: the confirmation measures the baseline B and each contender C
  in rounds, interleaved, so a drift of the machine hits both; round r gives
  the ratio C_r / B_r. The speedup is the geometric mean of the ratios and its
  95% interval is Student's t on their logarithms (n - 1 degrees of freedom).
- **Tie**: two contenders whose paired log-ratios' interval holds 0 are not
  separable; among those tied with the fastest, the rule picks the one on
  fewer devices, then the one with the lower peak memory. A fastest whose
  interval against the baseline holds 1 is no speedup: the answer is then the
  user's own configuration.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence

THROUGHPUT = "throughput_samples_per_s"
ACCURACY = "val_accuracy"
ANSWER_ATTR = "search.answer"  # on the study: Answer.to_dict()
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


NOISE = 0.10  # search throughputs this close to the fastest may be noise (identical trials differ by ~10% here)


def noise_window(base_throughputs: Sequence[float]) -> float:
    """How close two search throughputs must be to count as a tie: NOISE, or the spread of your configuration's
    own runs when this machine showed more (the confirmation's contenders and the search's patience read it
    alike)."""
    return max(NOISE, spread(base_throughputs))


def spread(throughputs: Sequence[float]) -> float:
    """How far apart one configuration's runs are, (max - min) / max; 0 with fewer than two. The baseline's own
    runs are this machine's noise as the sweep saw it: the contenders' window (search/sweep/confirm.py) and the
    early-stopping margin (search/sweep/early_stopping.py) widen to it."""
    return (max(throughputs) - min(throughputs)) / max(throughputs) if len(throughputs) > 1 else 0.0


Idle = Callable[[Mapping[str, Any]], set]  # the keys these values leave without effect (Space.unused)


def no_idle(params: Mapping[str, Any]) -> set[str]:
    return set()


def changed_text(params: Mapping[str, Any], baseline: Mapping[str, Any], idle: Idle = no_idle) -> str:
    """`k=v ...` for the knobs of `params` that differ from the baseline's, but those its other values leave
    without effect (`loader.persistent_workers=True` beside `loader.num_workers=0` trains as False does);
    "your configuration" when none do."""
    unused = idle(params)
    return " ".join(f"{k}={v}" for k, v in params.items()
                    if baseline.get(k) != v and k not in unused) or "your configuration"


def eligible(contenders: Sequence[Contender], floor: float | None, guarded: bool = True) -> list[Contender]:
    """Those at or above the accuracy floor, and those with your configuration's maths, fastest first. Without a
    floor, all when your constraints bound the quality (`guarded`: the candidates met them), else those with your
    maths only: nothing says what a configuration that changes the model's maths loses."""
    kept = [c for c in contenders
            if c.your_maths or (floor is None and guarded) or
            (floor is not None and c.val_accuracy is not None and c.val_accuracy >= floor)]
    return sorted(kept, key=lambda c: c.throughput, reverse=True)


def within_noise(ranked: Sequence[Contender], noise: float, most: int) -> list[Contender]:
    """The fastest and those whose search throughput is within `noise` (a fraction) of it, at most `most`."""
    if not ranked:
        return []
    top = ranked[0].throughput
    return [c for c in ranked if c.throughput >= top * (1.0 - noise)][:most]


def paired(numerators: Mapping[int, float], denominators: Mapping[int, float]) -> tuple[list[float], list[float]]:
    """Two configurations' throughputs by round number (search.confirm_round), kept where both have the round:
    a round that did not end ok for one of them pairs nothing (paired by position, the rounds after it slid)."""
    rounds = sorted(set(numerators) & set(denominators))
    return [numerators[r] for r in rounds], [denominators[r] for r in rounds]


def pick(confirmed: Sequence[tuple[Contender, Ratio, Mapping[int, float]]]) -> tuple[int, list[int], str]:
    """Index of the answer among (contender, speedup vs baseline, its throughput by round number), the indices
    tied with the fastest, and the rule used."""
    order = sorted(range(len(confirmed)), key=lambda i: confirmed[i][1].estimate, reverse=True)
    fastest = order[0]
    tied = []
    for i in order[1:]:
        versus = Ratio.of(*paired(confirmed[fastest][2], confirmed[i][2]))
        if versus is None or versus.holds(1.0):
            tied.append(i)
    if not tied:
        return fastest, [], "the fastest in confirmation"
    group = [fastest, *tied]
    chosen = min(group, key=lambda i: (confirmed[i][0].devices, confirmed[i][0].peak_memory_bytes,
                                        -confirmed[i][1].estimate))
    return chosen, [i for i in group if i != chosen], ("a tie within noise: the one on fewer devices, "
                                                       "then with less peak memory")


def seed_differences(check: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """The answer's val_accuracy less your configuration's at each of the second-seed check's (Answer.seed_check)
    two seeds, from its figures; None without a two-seed check. How far the two differ is the check's own noise,
    from your sweep: digits pruned by half lost 1.31 points on average over 20 seeds, with a standard deviation of
    1.74 points from seed to seed, and cleared both the floor and the check in 3 of 10 seed pairs (docs/answer.md)."""
    check = check or {}
    if "baseline_mean_val_accuracy" not in check:
        return None
    second = check["val_accuracy"] - check["baseline_val_accuracy"]
    return 2 * (check["mean_val_accuracy"] - check["baseline_mean_val_accuracy"]) - second, second


def seed_noise_text(answer: Answer) -> str:
    """One line when the answer's accuracy against yours moved by more than the tolerance between the check's two
    seeds: the check's mean then cannot resolve the tolerance ('' otherwise, and for your maths: the same model)."""
    differences = seed_differences(answer.seed_check)
    if differences is None or answer.your_maths or answer.is_baseline:
        return ""
    first, second = differences
    apart = abs(first - second)
    if apart <= answer.tolerance:
        return ""
    seed = answer.seed_check["seed"]
    return (f"seed noise: the answer's val_accuracy less yours was {first:+.4f} at seed {seed - 1} and {second:+.4f} "
            f"at seed {seed}, {apart / answer.tolerance:.1f}x the tolerance apart, so their mean can miss a loss of "
            f"accuracy that size (a tighter check needs more seeds: docs/answer.md)")


def panel_lines(answer: Answer, baseline_params: Mapping[str, Any], idle: Idle = no_idle) -> list[str]:
    """The terminal's last words (search/reports/answer.py draws them in a panel); `idle`: see changed_text."""
    lines = []
    if answer.is_baseline:
        lines.append("your configuration: " + (answer.note or "no configuration was faster beyond noise at the "
                                                               "same accuracy"))
        if answer.baseline_val_accuracy is not None:
            lines.append(f"val_accuracy {answer.baseline_val_accuracy:.4f}; the others had to reach "
                         f"{answer.baseline_val_accuracy - answer.tolerance:.4f} (tolerance {answer.tolerance:g})")
        return lines
    what = changed_text(answer.params, baseline_params, idle)
    if answer.rounds >= 2:
        lines.append(f"{what}: {answer.speedup:.2f}x your configuration (95% CI {answer.ci_low:.2f}-"
                     f"{answer.ci_high:.2f}, {answer.rounds} interleaved rounds)")
    else:
        lines.append(f"{what}: {answer.speedup:.2f}x your configuration")
    if answer.baseline_breaks:
        lines.append(f"your configuration does not meet hydra.sweeper.constraints ({answer.baseline_breaks}): the "
                     f"answer is the fastest configuration that does, faster than yours or not")
    if answer.val_accuracy is not None and answer.baseline_val_accuracy is not None:
        lines.append(f"val_accuracy {answer.val_accuracy:.4f} vs {answer.baseline_val_accuracy:.4f} " + (
            "(your configuration's maths, only speed-only knobs moved: your accuracy by construction)"
            if answer.your_maths else f"at tolerance {answer.tolerance:g}"))
    if answer.seed_check:
        c = answer.seed_check
        if c.get("your_maths"):
            lines.append(f"seeds {c['seed'] - 1} and {c['seed']}: your configuration's maths, so your val_accuracy at "
                         f"both (mean {c['baseline_mean_val_accuracy']:.4f}): passed by construction, not trained "
                         f"again (hydra.sweeper.staging=false trains it)")
        elif "mean_val_accuracy" in c:
            lines.append(f"seeds {c['seed'] - 1} and {c['seed']}: mean val_accuracy {c['mean_val_accuracy']:.4f} vs "
                         f"{c['baseline_mean_val_accuracy']:.4f} ({'passed' if c['passed'] else 'FAILED'}; at seed "
                         f"{c['seed']}: {c['val_accuracy']:.4f} vs {c['baseline_val_accuracy']:.4f})")
        else:  # an answer stored before the check took both seeds
            lines.append(f"seed {c['seed']}: val_accuracy {c['val_accuracy']:.4f} vs {c['baseline_val_accuracy']:.4f} "
                         f"({'passed' if c['passed'] else 'FAILED'})")
        if noise := seed_noise_text(answer):
            lines.append(noise)
    if answer.note:
        lines.append(answer.note)
    if answer.tied_with:
        lines.append(f"tied within noise with {len(answer.tied_with)} other(s); picked by {answer.rule}")
    for c in answer.not_confirmed:
        runs = len(c.get("trials", [])) or 1
        measured = f"{c['search_speedup']:.2f}x in " if c.get("search_speedup") else ""
        moved = changed_text(c["params"], baseline_params, idle)
        lines.append(f"not confirmed (hydra.sweeper.confirm_budget): {moved}, {measured}{runs} search "
                     f"run{'s' if runs > 1 else ''}, within noise of the search's fastest")
    return lines

"""The answer: the fastest configuration at the baseline's accuracy, with its speedup and a 95% interval.

Pure arithmetic on trials; search/sweep/confirm.py runs the measurements. The Answer, Contender and Ratio
themselves, as the study stores them, are search/record/answer.py's.

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

from typing import Any, Callable, Mapping, Sequence

from search.record import Answer, Contender, Ratio

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
        return lines + ([answer.search_ended] if answer.search_ended else [])
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
    return lines + ([answer.search_ended] if answer.search_ended else [])

"""Seed noise of val_accuracy: how far one configuration's accuracy moves between training seeds, and how much of
that the answer's second-seed check cancels by comparing configurations at the same seeds.

The sweep's accuracy tolerance (hydra.sweeper.accuracy_tolerance, 0.005) is compared with single runs (the
search's floor: a contender at your seed against your run at that seed) and with the mean of two seeds (the
second-seed check, docs/answer.md). Whether those comparisons can resolve 0.005 depends on the noise this
measures: your configuration (conf/config.yaml's values) and each of `--configs` trained whole at every seed,
interleaved seed by seed, each run as a sweep trial runs (a fresh isolated child).

Per configuration: the mean, standard deviation and range of val_accuracy over the seeds. Against yours, at
the same seed: the mean and standard deviation of the difference and the correlation; from them, by the normal
approximation, how often the two-seed check fails a configuration exactly as accurate as yours and passes one a
point less accurate; and, observed, at how many seeds the configuration clears the search's floor, and at how
many of the disjoint seed pairs (s, s+1) it clears both the floor at s and the check's two-seed mean.

    python scripts/bench/seed_noise.py                      # 20 seeds, 3 configurations -> docs/BENCHMARKS.md
    python scripts/bench/seed_noise.py --quick              # 2 seeds of a tiny budget, checks that it measures
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchdoc import load_averages, machine_line, write_section  # noqa: E402

SECTION = "## Seed noise of val_accuracy"
DATA = Path(__file__).resolve().parent / "data" / "seed_noise.csv"
# a change of numerics the check should pass (bf16), one of capacity it should catch (half the channels), one of
# speed only (the same model: the pairing cancels every bit of the noise)
CONFIGS = ["precision=bf16", "model_pruning.ratio=0.5", "loader.num_workers=2"]
QUICK_OVERRIDES = ["train.budget_samples=320", "train.warmup_steps=1", "train.window_steps=2"]
TOLERANCE = 0.005  # the sweep's default hydra.sweeper.accuracy_tolerance
LOSS = 0.01  # "a point less accurate"
YOURS = "your configuration"


def measure(configs: list[str], seeds: list[int], overrides: list[str], out: Path | None) -> dict[str, list[float]]:
    """val_accuracy of your configuration and each of `configs` at every seed, seed by seed; rows appended to
    `out` (config, seed, val_accuracy, trial_wall_s) as they finish."""
    from repeatability import compose

    from search.trial.isolate import run_isolated

    accuracy: dict[str, list[float]] = {name: [] for name in [YOURS, *configs]}
    f = out.open("a", newline="") if out is not None else None
    writer = csv.writer(f) if f is not None else None
    if writer is not None and out.stat().st_size == 0:
        writer.writerow(["config", "seed", "val_accuracy", "trial_wall_s"])
    for seed in seeds:
        for name in accuracy:
            cfg = compose(overrides + ([] if name == YOURS else name.split()) + [f"train.seed={seed}"])
            result = run_isolated(cfg, timeout_s=float(cfg["trial"]["timeout_s"]))
            m = result["metrics"]
            if result["outcome"] != "ok" or "val_accuracy" not in m:
                raise SystemExit(f"seed_noise: every run must end ok with a val_accuracy; {name} at seed {seed} "
                                 f"ended {result['outcome']} ({result['reason'][:200]}); fix: check it with "
                                 f"python -m search run {' '.join(overrides)} train.seed={seed}")
            accuracy[name].append(float(m["val_accuracy"]))
            print(f"seed {seed} {name}: val_accuracy {m['val_accuracy']:.4f}, {m.get('trial_wall_s', 0):.1f} s",
                  flush=True)
            if writer is not None:
                writer.writerow([name, seed, f"{m['val_accuracy']:.6f}", f"{m.get('trial_wall_s', 0):.2f}"])
                f.flush()
    if f is not None:
        f.close()
    return accuracy


def _below(z: float) -> float:
    """P(Z < z) for a standard normal Z."""
    return 0.5 * math.erfc(-z / math.sqrt(2))


def paired(yours: list[float], theirs: list[float], seeds: list[int], tolerance: float = TOLERANCE) -> dict:
    """The configuration against yours at the same seeds: the difference's mean, standard deviation and the
    correlation; the two-seed check's error rates by the normal approximation; the floor and the check as
    observed (floor: the difference at a seed >= -tolerance; check: also the mean over the pair (s, s+1))."""
    d = [t - y for t, y in zip(theirs, yours)]
    sd = statistics.stdev(d) if len(d) > 1 else 0.0
    two_seed_sd = sd / math.sqrt(2)
    pairs = [(i, i + 1) for i in range(0, len(d) - 1, 2) if seeds[i + 1] == seeds[i] + 1]
    varies = len(d) > 2 and sd > 0 and len(set(yours)) > 1 and len(set(theirs)) > 1  # else no correlation
    return {
        "mean_difference": statistics.mean(d), "sd_difference": sd,
        "correlation": statistics.correlation(yours, theirs) if varies else None,
        "equal_fails": _below(-tolerance / two_seed_sd) if two_seed_sd > 0 else 0.0,
        "loss_passes": _below(-(LOSS - tolerance) / two_seed_sd) if two_seed_sd > 0 else 0.0,
        "floor_cleared": sum(x >= -tolerance for x in d), "seeds": len(d),
        "both_cleared": sum(d[i] >= -tolerance and (d[i] + d[j]) / 2 >= -tolerance for i, j in pairs),
        "pairs": len(pairs),
    }


def _pct(p: float) -> str:
    return f"{p:.0%}"


def render(command: str, accuracy: dict[str, list[float]], seeds: list[int], overrides: list[str],
           load: tuple[str, str], wall_s: float, raw_kept: bool = True) -> str:
    """The doc's section; `raw_kept`: the raw values were written to the data file (not with --no-write)."""
    yours = accuracy[YOURS]
    lines = [f"Command: `{command}`  ",
             f"Machine: {machine_line()}  ",
             f"Date: {dt.date.today().isoformat()}; {wall_s / 60:.0f} min; load average (1, 5, 15 min) {load[0]} "
             f"before, {load[1]} after (the accuracy does not depend on the load: each run is deterministic at "
             f"its seed)  ",
             f"Runs: conf/'s configuration"
             f"{' with ' + ' '.join(overrides) if overrides else ' (the digits objective)'}, every "
             f"configuration trained whole at `train.seed` {seeds[0]} to {seeds[-1]} ({len(seeds)} seeds), "
             f"interleaved seed by seed" + ("; raw values in `scripts/bench/data/seed_noise.csv`" if raw_kept else ""),
             "",
             "| configuration | val_accuracy mean | sd (points) | range | vs yours at the same seed: mean "
             "difference (points) | sd of the difference | correlation | check fails an equal one | check passes "
             "one a point worse | floor cleared (seeds) | floor and check cleared (pairs) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, values in accuracy.items():
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        row = f"| {name} | {statistics.mean(values):.4f} | {sd * 100:.2f} | {min(values):.4f}-{max(values):.4f} |"
        if name == YOURS:
            lines.append(row + " - | - | - | - | - | - | - |")
            continue
        p = paired(yours, values, seeds)
        corr = "-" if p["correlation"] is None else f"{p['correlation']:.2f}"
        lines.append(row + f" {p['mean_difference'] * 100:+.2f} | {p['sd_difference'] * 100:.2f} | {corr} | "
                           f"{_pct(p['equal_fails'])} | {_pct(p['loss_passes'])} | {p['floor_cleared']} of "
                           f"{p['seeds']} | {p['both_cleared']} of {p['pairs']} |")
    lines += ["", f"Check rates by the normal approximation: the two-seed mean of the difference has the difference's "
                  f"standard deviation over the square root of 2; the check fails it below -{TOLERANCE} (the default "
                  f"tolerance), an equal configuration's mean difference is 0 and a point worse one's -0.01. Floor: "
                  f"the configuration at a seed against yours at that seed, as the search's floor compares "
                  f"them; floor and check: the pairs of seeds (s, s+1), s the first of each, where it clears both."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=CONFIGS, metavar="OVERRIDES",
                        help="configurations to compare with yours, each one string of Hydra overrides")
    parser.add_argument("--seeds", type=int, default=20, help="training seeds, from --first-seed")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2 seeds of a tiny budget, one configuration")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides every run shares (train.budget_samples=...)")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        print(f"seed_noise: --seeds must be >= 2 (a standard deviation needs two); got {args.seeds}; fix: --seeds 20",
              file=sys.stderr)
        return 2
    seeds = list(range(args.first_seed, args.first_seed + (2 if args.quick else args.seeds)))
    configs = args.configs[:1] if args.quick else args.configs
    overrides = (QUICK_OVERRIDES if args.quick else []) + args.overrides
    write = not args.quick and not args.no_write
    load_before, started = load_averages(), time.perf_counter()
    if write and DATA.exists():
        DATA.unlink()  # the doc's table and the raw values always come from the same run
    accuracy = measure(configs, seeds, overrides, DATA if write else None)
    wall_s, load_after = time.perf_counter() - started, load_averages()
    for name, values in accuracy.items():
        sd = statistics.stdev(values)
        text = f"{name}: mean {statistics.mean(values):.4f}, sd {sd * 100:.2f} points"
        if name != YOURS:
            p = paired(accuracy[YOURS], values, seeds)
            text += (f"; vs yours {p['mean_difference'] * 100:+.2f} points, sd of the difference "
                     f"{p['sd_difference'] * 100:.2f}; the check fails an equal one {_pct(p['equal_fails'])}, passes "
                     f"one a point worse {_pct(p['loss_passes'])}")
        print(text)
    command = "python scripts/bench/seed_noise.py" + "".join(f" {a}" for a in argv)
    text = render(command, accuracy, seeds, overrides, (load_before, load_after), wall_s, raw_kept=write)
    print(text)
    if write:
        write_section(SECTION, text)
        print("updated docs/BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Search efficiency: how many trials the sweep's search needs to find the answer, on landscapes it was
never tuned on, replayed offline through the sweep's own engine.

The answer is the one the sweep gives (DESIGN.md, "The answer"): the
fastest configuration at your accuracy. Your configuration is the grid
cell of conf/config.yaml's defaults (with the grid's overrides); the floor
is its val_accuracy less the sweep's tolerance (0.005); the target is 95%
of the best throughput among the cells that meet the floor. A replay
(scripts/bench/replay.py) builds the search exactly as the sweeper does
(search/sweep/build.py) and looks each trial's result up in the grid
(scripts/bench/grids.py) instead of training: a run is one default sweep
(20 trials, patience on), run again on the same study until the target if
it did not get there.

Per strategy and seed: the trials (your configuration's runs count) until
a trial that ran ok reaches the target at the floor; whether the first
sweep got there (`missed` counts the seeds whose sweep did not); the
seconds those trials take (each cell's measured trial_wall_s; a stopped
trial its start-up and its training up to the end of its probe, a
timed-only one up to the end of its windows); the seconds of the first
sweep; HV@10; how many seeds took a path of their own (the configurations
of their first sweep, in order: 30 seeds on one path is one result, not
30).

The goals, on every landscape, held-out ones included: the default
reaches the target in a median <= 12 trials, misses it within the sweep in
<= 10% of seeds, and needs <= half of random search's median. The
landscape library (`--library`, docs/landscapes.md) is the measured grids
plus synthetic ones of known shape, in two halves (split A and B) so that
a change tuned on one half is judged on the other; the doc reports every
landscape and the worst.

    python scripts/bench/search_efficiency.py --table GRID.csv --seeds 30 --no-write --strategies default random
    python scripts/bench/search_efficiency.py --library            # every landscape, 30 seeds -> docs/BENCHMARKS.md
    python scripts/bench/search_efficiency.py --library --split A --no-write   # the half a change is tuned on
    python scripts/bench/search_efficiency.py --quick              # 2 seeds, 3 strategies: checks the replay works
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchdoc import load_averages, update_summary, write_section  # noqa: E402
from grids import (TARGET_FRACTION, Table, averaged_seeds, baseline_of, floor_of, hypervolume,  # noqa: E402,F401
                   denoised, key_of, label, load_table, read_grid, target_of, training_seeds)
from replay import STRATEGIES, default_sampler_node, replay  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
LIBRARY = DATA / "landscapes"
MEASURED = [DATA / f"{name}.csv" for name in ("digits_grid", "digits_lr_grid", "digits_long_grid", "gpt_grid",
                                               "digits_wide_grid")]
SECTION = "## Search efficiency"
SWEEP_TRIALS = 20  # conf/search/default.yaml n_trials: one default sweep
MAX_TRIALS = 40  # a model-based run not at the target by then counts this many (random search runs to the target)
GOAL_MEDIAN = 12  # the default's median trials to the target, at most
GOAL_MISSED = 0.10  # ... the seeds whose first sweep misses it, at most this share
GOAL_RATIO = 0.5  # ... and at most this fraction of random search's median
QUICK_STRATEGIES = ["default", "random", "hydra grid order"]


def library(split: str) -> list[Path]:
    """The landscapes of the library: the measured grids (split A) and the synthetic ones in their own split."""
    tables = [p for p in MEASURED if p.exists() or p.with_suffix(".seeds.csv").exists()]
    chosen = [(p, "A") for p in tables]
    for path in sorted(LIBRARY.glob("*.csv")):
        meta = json.loads(path.with_suffix(".json").read_text())
        chosen.append((path, meta.get("split", "A")))
    return [p for p, s in chosen if split in ("all", s)]


def split_of(table: Table) -> str:
    return str(table.meta.get("split", "A"))


def summarise(runs: list[dict], grid_hv: float) -> dict:
    trials = sorted(r["trials_to_target"] for r in runs)
    hvs = [r["hv"] for r in runs if r["hv"] is not None]
    return {"median": statistics.median(trials), "mean": statistics.fmean(trials),
            "p10": trials[int(0.1 * (len(trials) - 1))], "p90": trials[int(0.9 * (len(trials) - 1))],
            "min": trials[0], "max": trials[-1],
            "numbers": statistics.median(r["numbers_to_target"] for r in runs),
            "seconds": statistics.median(r["seconds_to_target"] for r in runs),
            "seconds_mean": statistics.fmean(r["seconds_to_target"] for r in runs),
            "missed": sum(not r["in_sweep"] for r in runs), "seeds": len(runs),
            "paths": len({r["path"] for r in runs}),
            "hv": statistics.fmean(hvs) / grid_hv if len(hvs) == len(runs) and grid_hv else None,
            "sweep_s": statistics.median(r["sweep_s"] for r in runs),
            "stopped": _most_common([r["stopped"] for r in runs])}


def _most_common(values: list) -> str:
    values = [("patience" if v and v.startswith("the sampler") else v) or "-" for v in values]
    return max(set(values), key=values.count) if values else "-"


def line_of(name: str, s: dict) -> str:
    hv = f"{s['hv']:.3f}" if s["hv"] is not None else "-"
    return (f"{name:58s}  trials to target mean {s['mean']:6.1f} median {s['median']:5.1f} max {s['max']:4d}  "
            f"numbers {s['numbers']:5.1f}  seconds median {s['seconds']:6.0f} mean {s['seconds_mean']:6.0f}  "
            f"{SWEEP_TRIALS} trials {s['sweep_s']:.0f} s  HV@10 {hv}  missed {s['missed']}  "
            f"p10-p90 {s['p10']}-{s['p90']}  paths {s['paths']}/{s['seeds']}")


def verdict(rows: dict[str, dict]) -> tuple[float, bool]:
    d, r = rows["default"], rows["random"]
    ratio = d["median"] / r["median"]
    return ratio, d["median"] <= GOAL_MEDIAN and d["missed"] <= GOAL_MISSED * d["seeds"] and ratio <= GOAL_RATIO


def replay_table(path: Path, args: argparse.Namespace, strategies: list[str], seeds: int) -> dict:
    """Every strategy's runs on one grid, printed as they end; the grid's figures for the doc."""
    table = read_grid(path, not args.as_measured, args.training_seeds)
    baseline = baseline_of(table)
    floor = floor_of(table, baseline, args.accuracy_floor)
    target = target_of(table, floor, args.target_fraction)
    print(f"{table.name}: baseline {baseline}, floor {floor:.4f}, target {target:.0f} samples/s"
          + (f", throughput from {table.name}.works.csv" if table.work_speed is not None and not args.as_measured
             else "")
          + (f", accuracy the mean at training seeds {' '.join(map(str, training_seeds(table)))} "
             f"({table.name}.seeds.csv)" if table.seed_accuracy is not None and not args.as_measured else ""),
          flush=True)
    ok = [r for r in table.results.values() if r["outcome"] == "ok"]
    grid_hv = hypervolume([(r["metrics"]["throughput_samples_per_s"], r["metrics"]["val_accuracy"]) for r in ok],
                          max(r["metrics"]["throughput_samples_per_s"] for r in ok))
    rows = {}
    for name in strategies:
        t0 = time.perf_counter()
        limit = 8 if args.quick else MAX_TRIALS
        runs = [replay(table, name, seed, floor, target, SWEEP_TRIALS, limit) for seed in range(seeds)]
        rows[name] = summarise(runs, grid_hv)
        print(line_of(name, rows[name]) + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    figures = {"name": label(table), "split": split_of(table), "cells": len(table.results), "rows": rows,
               "structure": table.meta.get("structure", ""), "synthetic": bool(table.meta.get("synthetic"))}
    if "default" in rows and "random" in rows:
        ratio, met = verdict(rows)
        figures.update(ratio=ratio, met=met)
        print(f"{table.name}: default / random trials to target: {ratio:.2f} (medians; goal: default median <= "
              f"{GOAL_MEDIAN}, missed within the sweep <= {GOAL_MISSED:.0%} of seeds, ratio <= {GOAL_RATIO:.2f}): "
              + ("not judged (--quick: model-based runs stop at 8 trials)" if args.quick else
                 f"not judged (the target at {args.target_fraction} of the best, the goal's at {TARGET_FRACTION})"
                 if args.target_fraction != TARGET_FRACTION else "met" if met else "missed"), flush=True)
    return figures


def worst(figures: list[dict]) -> dict | None:
    """The landscape the default does worst on: the most seeds missed in the sweep, then the highest median."""
    judged = [f for f in figures if "ratio" in f]
    return max(judged, key=lambda f: (f["rows"]["default"]["missed"], f["rows"]["default"]["median"], f["ratio"]),
               default=None)


def render(command: str, seeds: int, figures: list[dict], wall_s: float) -> str:
    lines = [SECTION, "",
             f"Command: `{command}` (replay: {wall_s:.0f} s, load average {load_averages()}), {seeds} seeds per "
             f"strategy and landscape; default sampler `{json.dumps(default_sampler_node())}`.", "",
             "Each run is one default sweep (20 trials, patience on) through the sweep's own engine, the trial's "
             "result looked up in the landscape; a run not at the target after it goes on as the same command run "
             "again. Trials to target count your configuration's two runs. `missed`: seeds whose first sweep did "
             "not reach the target. `paths`: seeds whose first sweep ran a sequence of configurations of its own. "
             "Goal per landscape: default median <= 12, missed <= 10% of seeds, <= 0.5x random search's median. "
             "Landscapes: docs/landscapes.md.", ""]
    if (w := worst(figures)) is not None:
        d = w["rows"]["default"]
        lines += [f"**Worst landscape: {w['name']}** (split {w['split']}): default median {d['median']:.1f} trials "
                  f"(p10-p90 {d['p10']}-{d['p90']}, max {d['max']}), missed in {d['missed']} of {d['seeds']} "
                  f"seeds, {w['ratio']:.2f}x random search's median "
                  f"({'meets' if w['met'] else 'MISSES'} the goal).", ""]
    for split in ("A", "B"):
        part = [f for f in figures if f["split"] == split and "ratio" in f]
        if not part:
            continue
        lines += [f"### Split {split}", "",
                  "| landscape | cells | default median | p10-p90 | max | missed | paths | random median | ratio "
                  "| sweep stops by | goal |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for f in part:
            d, r = f["rows"]["default"], f["rows"]["random"]
            lines.append(f"| {f['name']} | {f['cells']} | {d['median']:.1f} | {d['p10']}-{d['p90']} | {d['max']} | "
                         f"{d['missed']}/{d['seeds']} | {d['paths']}/{d['seeds']} | {r['median']:.1f} | "
                         f"{f['ratio']:.2f} | {d['stopped']} | {'met' if f['met'] else 'missed'} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=Path, nargs="+", help="these grids (default: the library)")
    parser.add_argument("--table", type=Path, help="one grid only")
    parser.add_argument("--library", action="store_true", help="every landscape of the library (the default)")
    parser.add_argument("--split", choices=["A", "B", "all"], default="all", help="the library's half to replay")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--accuracy-floor", type=float, default=None,
                        help="instead of the baseline's val_accuracy minus the tolerance")
    parser.add_argument("--strategies", nargs="*", default=["default", "random"], choices=list(STRATEGIES))
    parser.add_argument("--target-fraction", type=float, default=TARGET_FRACTION,
                        help="the target as a fraction of the best throughput at the floor (another prints only)")
    parser.add_argument("--as-measured", action="store_true",
                        help="each cell as measured, without reading same-maths and same-work cells together")
    parser.add_argument("--training-seeds", type=int, nargs="+", metavar="SEED",
                        help="a cell's accuracy: the mean at these training seeds only (0, the table's own, always "
                             "among them; default: every seed in <grid>.seeds.csv)")
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, 3 strategies, at most 8 trials; checks the replay works")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        print(f"search_efficiency: --seeds must be >= 2; got {args.seeds}; fix: --seeds 30", file=sys.stderr)
        return 2
    if args.training_seeds is not None and 0 not in args.training_seeds:
        print(f"search_efficiency: --training-seeds must include 0, the table's own seed (its cells' speed and "
              f"outcome come from it); got {' '.join(map(str, args.training_seeds))}; fix: --training-seeds 0 "
              + " ".join(map(str, args.training_seeds)), file=sys.stderr)
        return 2
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    started = time.perf_counter()
    tables = [args.table] if args.table else args.tables or ([MEASURED[0]] if args.quick else library(args.split))
    strategies = QUICK_STRATEGIES if args.quick else [s for s in ("default", "random") if s in args.strategies] + [
        s for s in args.strategies if s not in ("default", "random")]
    seeds = 2 if args.quick else args.seeds
    figures = [replay_table(path, args, strategies, seeds) for path in tables]
    judged = [f for f in figures if "ratio" in f]
    if (w := worst(judged)) is not None and len(judged) > 1:
        print(f"worst landscape: {w['name']} (default median {w['rows']['default']['median']:.1f}, missed "
              f"{w['rows']['default']['missed']}, ratio {w['ratio']:.2f}): "
              + ("every landscape meets the goal" if all(f["met"] for f in judged) else
                 f"{sum(not f['met'] for f in judged)} of {len(judged)} landscapes miss the goal"), flush=True)
    if not (args.quick or args.no_write or args.table or args.tables) and judged:
        command = "python scripts/bench/search_efficiency.py" + "".join(f" {shlex.quote(a)}" for a in argv)
        # the section is rewritten whole: earlier figures measured another search (git keeps them)
        write_section(SECTION, render(command, seeds, figures, time.perf_counter() - started), keep_earlier=False)
        w = worst(judged)
        update_summary("Search efficiency",
                       f"{sum(f['met'] for f in judged)} of {len(judged)} landscapes meet the goal; worst: "
                       f"{w['name']}, median {w['rows']['default']['median']:.1f} trials, missed "
                       f"{w['rows']['default']['missed']}/{seeds}, {w['ratio']:.2f}x random's, {seeds} seeds",
                       all(f["met"] for f in judged))
        print("updated docs/BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

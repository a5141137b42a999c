"""Measure every configuration of a search space once: the table that
search_efficiency.py replays samplers against.

Each configuration runs exactly as a sweep trial runs (composed from conf/,
in a fresh isolated child via search.trial.isolate.run_isolated), so infeasible
values (more DDP ranks x threads than cores) are recorded as the sweep
would see them. Rows are appended as they finish, so an interrupted
measurement resumes where it stopped.

    python scripts/bench/measure_grid.py                # SPACE below, twice -> scripts/bench/data/digits_grid.*
    python scripts/bench/measure_grid.py --grid digits_lr_grid --passes 1   # LR_SPACE, once
    python scripts/bench/measure_grid.py --quick --out DIR   # 2 tiny configurations, < 30 s
    python scripts/bench/measure_grid.py --grid digits_lr_grid --works --passes 3   # -> digits_lr_grid.works.*
    python scripts/bench/measure_grid.py --grid digits_lr_grid --seeds 1 2   # -> digits_lr_grid.seeds.*
    python scripts/bench/measure_grid.py --grid digits_long_grid --seeds 0 1 2   # its models (it has no cell table)
    python scripts/bench/measure_grid.py --grid digits_long_grid --works --passes 3   # then its works
    python scripts/bench/measure_grid.py --grid gpt_grid --works --passes 3   # the tiny GPT's works, then
    python scripts/bench/measure_grid.py --grid gpt_grid --seeds 0 1 2        # its models

`--works` times each amount of work of a grid instead: its configurations
less the knobs that change only the maths (the learning rate), run
`train.throughput_only=true` (the warm-up and the timed windows, no
evaluation), every pass in a new shuffled order so that a neighbour's load
falls on all of them alike. search_efficiency.py then reads a cell's
throughput from its work's row: a grid measured once per cell under a
changing load ranks its works by when they ran, not by what they do.

`--seeds` trains each model of a grid again at other training seeds: its
configurations less the speed-only knobs (those keep their conf/ values),
full training and evaluation, val_accuracy kept. search_efficiency.py then
reads a cell's accuracy as the mean over the seeds: at this budget one
model's val_accuracy moves by several points from one seed to the next,
far more than the sweep's accuracy tolerance, so one seed's table ranks
configurations partly by that seed's luck.
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import itertools
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

DATA = Path(__file__).resolve().parent / "data"
# The default space (conf/search/default.yaml) has 576 configurations; at its
# budget that is about an hour on two quiet cores, and the cores were shared.
# Measured instead: every knob of it but persistent_workers (false), its two
# extreme values for workers and model pruning, all four batch sizes, at a
# budget of 3000 samples; each configuration twice (in opposite orders), the
# faster measurement kept, because other jobs only ever slow a run down.
SPACE = {
    "batch_size": "choice(32, 64, 128, 256)",
    "loader.num_workers": "choice(0, 2)",
    "precision": "choice(fp32, bf16)",
    "model_pruning.ratio": "choice(0.0, 0.5)",
    "parallel.devices": "choice(1, 2)",
    "parallel.threads": "choice(1, 2)",
}
BUDGET_OVERRIDES = ["train.budget_samples=3000", "train.warmup_steps=2", "train.window_steps=5"]
# A second grid with other knobs, for samplers not tuned on the first: learning rate (its best value, for
# accuracy, is in the middle of its range, and it moves with the batch size), five batch sizes, four model
# pruning ratios, both CPU precisions; 280 configurations, measured once each (about 25 minutes).
LR_SPACE = {
    "batch_size": "choice(16, 32, 64, 128, 256)",
    "optim.lr": "choice(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)",
    "model_pruning.ratio": "choice(0.0, 0.25, 0.5, 0.75)",
    "precision": "choice(fp32, bf16)",
}
# A third grid, trained longer. At 3,000 samples a model's val_accuracy moves by 3-4 points (sd) between training
# seeds, six times the sweep's tolerance (0.5 points), so the two grids above rank their cells near the floor by
# the seeds' luck. At 20,000 samples (about 14 epochs of digits) the baseline's moves by 0.72 points over 14 seeds
# (docs/BENCHMARKS.md, search efficiency), half the default budget's: firmer, not firm; a cell's mean needs about
# 8 seeds to be firm to 0.25 points (it has 6). Measured by parts, because a cell's accuracy depends only on its
# maths and its throughput only on its work: every model (the grid less its speed-only knobs) trained whole at a
# few seeds (`--seeds`), every work timed throughput-only (`--works`); search_efficiency.py composes the cells.
# Learning rate (its best in the middle, and it moves with the batch size), three batch sizes, model pruning, both
# CPU precisions; loader workers and threads, speed only: 360 configurations, 60 models, 72 works.
LONG_SPACE = {
    "batch_size": "choice(64, 128, 256)",
    "optim.lr": "choice(0.001, 0.002, 0.005, 0.01, 0.02)",
    "model_pruning.ratio": "choice(0.0, 0.5)",
    "precision": "choice(fp32, bf16)",
    "loader.num_workers": "choice(0, 1, 2)",
    "parallel.threads": "choice(1, 2)",
}
LONG_OVERRIDES = ["train.budget_samples=20000"]
# A fourth grid, another workload: the tiny GPT (objective=gpt: 2 layers, next-byte accuracy on Python's own
# sources) at its default budget, measured by parts after the start design's rules were made on the three digits
# grids, to test them. Learning rate around gpt's own 0.002, four batch sizes, model pruning of the MLPs, both CPU
# precisions; loader workers and threads, speed only: 320 configurations, 80 models, 64 works.
GPT_SPACE = {
    "batch_size": "choice(16, 32, 64, 128)",
    "optim.lr": "choice(0.0005, 0.001, 0.002, 0.005, 0.01)",
    "model_pruning.ratio": "choice(0.0, 0.5)",
    "precision": "choice(fp32, bf16)",
    "loader.num_workers": "choice(0, 2)",
    "parallel.threads": "choice(1, 2)",
}
GPT_OVERRIDES = ["objective=gpt"]
# A fifth grid, wider, at the default budget, each cell measured once: six batch sizes from 16 to 512, loader
# workers, both CPU precisions, four model pruning ratios, threads; 288 configurations, for a landscape the
# start design's rules were not made on (docs/search.md, the landscape library).
WIDE_SPACE = {
    "batch_size": "choice(16, 32, 64, 128, 256, 512)",
    "loader.num_workers": "choice(0, 1, 2)",
    "precision": "choice(fp32, bf16)",
    "model_pruning.ratio": "choice(0.0, 0.25, 0.5, 0.75)",
    "parallel.threads": "choice(1, 2)",
}
GRIDS = {"digits_grid": (SPACE, BUDGET_OVERRIDES), "digits_lr_grid": (LR_SPACE, BUDGET_OVERRIDES),
         "digits_long_grid": (LONG_SPACE, LONG_OVERRIDES), "gpt_grid": (GPT_SPACE, GPT_OVERRIDES),
         "digits_wide_grid": (WIDE_SPACE, [])}
# Grids measured by parts only (models at seeds, works timed): no table of whole cells.
BY_PARTS = frozenset({"digits_long_grid", "gpt_grid"})
QUICK_OVERRIDES = ["train.budget_samples=320", "train.warmup_steps=1", "train.window_steps=2"]
QUICK_SPACE = {"batch_size": "choice(32, 64)"}
WORK_METRICS = ["throughput_samples_per_s", "throughput_cv", "train_wall_s", "trial_wall_s"]
# a model's own throughput and times too: a grid measured by parts scales its training time to each work's speed
SEED_METRICS = ["val_accuracy", "val_loss", "trial_wall_s", "throughput_samples_per_s", "train_wall_s", "eval_wall_s"]
METRICS = ["throughput_samples_per_s", "val_accuracy", "val_loss", "throughput_cv", "train_wall_s", "eval_wall_s",
           "trial_wall_s"]


def grid(space: dict[str, str]) -> list[dict]:
    """Every configuration, in Hydra's BasicSweeper order (the product, last knob fastest)."""
    from search.sweep.space import build_space, grid_values

    values = grid_values(build_space(space, []).distributions)
    keys = list(space)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(values[k] for k in keys))]


def work_space(space: dict[str, str]) -> dict[str, str]:
    """The grid less the knobs that change the maths but not the work a step does (KNOB.work_neutral: the
    learning rate scales the same update): one entry per amount of work."""
    from search.sweep.start_design import WORK_NEUTRAL

    return {k: v for k, v in space.items() if k not in WORK_NEUTRAL}


def maths_space(space: dict[str, str]) -> dict[str, str]:
    """The grid less the speed-only knobs: one entry per model trained."""
    from search.sweep.staging import SPEED_ONLY

    return {k: v for k, v in space.items() if k not in SPEED_ONLY}


def measure(space: dict[str, str], overrides: list[str], table: Path, passes: int,
            works: bool = False, seeds: list[int] | None = None) -> list[dict]:
    """Every configuration `passes` times (alternate passes in reverse order); with `works`, every work
    throughput-only, each pass in its own shuffled order; with `seeds`, every configuration once at each
    training seed (a row's `seed` instead of its `pass`)."""
    import psutil
    from repeatability import compose

    from search.trial.isolate import run_isolated
    from search.sweep.space import to_override

    keys = list(space)
    metrics = SEED_METRICS if seeds else WORK_METRICS if works else METRICS
    column = "seed" if seeds else "pass"
    done = read_table(table) if table.exists() else []
    seen = {(r[column], *(str(r[k]) for k in keys)) for r in done}
    configs = grid(space)

    def ordered(p: int) -> list[dict]:
        if works:
            return random.Random(p).sample(configs, len(configs))
        return configs if p % 2 else configs[::-1]

    runs = seeds or range(1, passes + 1)
    todo = [(p, c) for p in runs for c in ordered(p)
            if (str(p), *(str(c[k]) for k in keys)) not in seen]
    print(f"{len(done)} measurements done already, {len(todo)} to go", flush=True)
    new = not table.exists() or table.stat().st_size == 0  # empty: stopped before its first row
    fields = [*keys, column, "outcome", "reason", *metrics, "load_avg_1min", "other_cores_during"]
    if not new:  # rows added to a table an earlier run wrote keep its columns (seeds tables before the times)
        with table.open() as f:
            fields = next(csv.reader(f))
    with table.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        for i, (number, config) in enumerate(todo, 1):
            seed = [f"train.seed={number}"] if seeds else []
            cfg = compose(overrides + [to_override(k, v) for k, v in config.items()] + seed)
            load = os.getloadavg()[0]
            psutil.cpu_percent(None)
            result = run_isolated(cfg, timeout_s=float(cfg["trial"]["timeout_s"]))
            m = result["metrics"]
            # both in cores: the whole machine's use minus the trial tree's own (psutil: 100% = one core)
            others = max(0.0, psutil.cpu_percent(None) / 100 * psutil.cpu_count()
                         - m.get("cpu_util_percent_mean", 0.0) / 100)
            row = {**config, column: number, "outcome": result["outcome"], "reason": result["reason"][:200],
                   **{k: m.get(k, "") for k in metrics}, "load_avg_1min": f"{load:.2f}",
                   "other_cores_during": f"{others:.2f}"}
            writer.writerow(row)
            f.flush()
            done.append(row)
            accuracy = f"acc {m['val_accuracy']:.3f}" if "val_accuracy" in m else ""
            speed = f"{m['throughput_samples_per_s']:.0f} samples/s" if not seeds else ""
            shown = result["outcome"] if result["outcome"] != "ok" else ", ".join(x for x in (speed, accuracy) if x)
            print(f"[{i}/{len(todo)}] {column} {number} {config}: {shown}, {m.get('trial_wall_s', 0):.1f} s, "
                  f"load {load:.2f}, other processes {others:.2f} cores", flush=True)
    return done


def read_table(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def write_meta(path: Path, space: dict[str, str], overrides: list[str], command: str, started: str,
               wall_s: float, seeds: list[int] | None = None, added: bool = False) -> None:
    """The table's provenance. `added`: this run added rows to a table an earlier run wrote (other seeds, more
    passes), so its command and time are added to the earlier ones and the first date kept."""
    from benchdoc import machine_line

    earlier = json.loads(path.read_text()) if added and path.exists() else None
    if earlier is not None:
        commands = earlier["command"].split("; ")
        command = "; ".join(commands + ([command] if command not in commands else []))
        started, wall_s = earlier["date"], wall_s + earlier["wall_s"]
    meta = {"command": command, "space": space, "overrides": overrides, "date": started,
            "machine": machine_line(),
            "wall_s": round(wall_s, 1), **({"seeds": seeds} if seeds else {}),
            "note": "load_avg_1min: os.getloadavg() just before each configuration; other_cores_during: cores "
                    "other processes kept busy while it ran (all CPU use minus the trial tree's own)"}
    path.write_text(json.dumps(meta, indent=1) + "\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 tiny configurations; checks that measuring works")
    parser.add_argument("--passes", type=int, default=2, help="measurements of each configuration (fastest kept)")
    parser.add_argument("--grid", choices=list(GRIDS), default="digits_grid", help="which space: its table's name")
    parser.add_argument("--works", action="store_true",
                        help="time each work of the grid (less the learning rate) throughput-only -> <grid>.works.csv")
    parser.add_argument("--seeds", type=int, nargs="+", metavar="SEED",
                        help="train each model of the grid (less its speed-only knobs) at these training seeds, "
                             "val_accuracy kept -> <grid>.seeds.csv")
    parser.add_argument("--out", type=Path, default=DATA, help="directory for <grid>.csv and .json")
    args = parser.parse_args(argv)
    if args.works and args.seeds:
        parser.error(f"--works times the work and --seeds trains the models: one at a time, not both "
                     f"(got --works and --seeds {' '.join(map(str, args.seeds))}); run them one after the other")
    if args.grid in BY_PARTS and not (args.works or args.seeds):
        parser.error(f"{args.grid} is measured by parts, its models at seeds and its works timed, not cell by cell "
                     f"(got --grid {args.grid} alone); run --grid {args.grid} --seeds 0 1 2, then --grid "
                     f"{args.grid} --works --passes 3")
    space, overrides = GRIDS[args.grid]
    space = QUICK_SPACE if args.quick else space
    space = work_space(space) if args.works else maths_space(space) if args.seeds else space
    overrides = (overrides + (QUICK_OVERRIDES if args.quick else [])
                 + (["train.throughput_only=true"] if args.works else []))
    args.out.mkdir(parents=True, exist_ok=True)
    kind = ".works" if args.works else ".seeds" if args.seeds else ""
    table = args.out / f"{args.grid}{kind}.csv"
    started, t0 = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), time.perf_counter()
    added = table.exists()
    rows = measure(space, overrides, table, 1 if args.quick else args.passes, args.works, args.seeds)
    ok = [r for r in rows if r["outcome"] == "ok"]
    if not ok:
        print("measure_grid: at least one configuration must finish ok; none did", file=sys.stderr)
        return 1
    shown = "".join(f" {a}" for a in argv if a not in ("--out", str(args.out)))
    write_meta(table.with_suffix(".json"), space, overrides, f"python scripts/bench/measure_grid.py{shown}",
               started, time.perf_counter() - t0,
               sorted({int(r["seed"]) for r in rows}) if args.seeds else None, added)
    print(f"{len(rows)} measurements ({len(ok)} ok) in {table}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

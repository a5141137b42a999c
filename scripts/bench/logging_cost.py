"""Logging cost: the time a real sweep spends in MLflow, against the time its
trials take.

Runs `python -m search multirun` on the default space (default budget) with
every call into search.tracking.mlflow_runs timed (timed_sweep.py): per trial, opening
its run with the whole flattened config as params and closing it with its
metrics, tags and outcome; per sweep, importing MLflow, the reachability
check, the parent run and its end. MLflow stores in a fresh local SQLite
database, the default. Goal (issue 9): MLflow logging at most 1% of trial time.

    python scripts/bench/logging_cost.py           # 5 trials -> docs/BENCHMARKS.md
    python scripts/bench/logging_cost.py --quick   # 2 tiny trials, < 30 s
"""
from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchdoc import load_averages, machine_line, update_summary, write_section  # noqa: E402
from timed_sweep import PER_TRIAL, run_timed_sweep  # noqa: E402

SECTION = "## Logging cost"
# One rank: 2 ranks x 2 threads is infeasible on 2 cores, and a quick run must have an ok trial to measure.
QUICK_OVERRIDES = ["train.budget_samples=320", "train.warmup_steps=1", "train.window_steps=2", "parallel.devices=1"]
GOAL = 0.01


def measure(n: int, overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-logging-") as tmp:
        run = run_timed_sweep(["multirun", f"hydra.sweeper.n_trials={n}", *overrides], Path(tmp))
    by_call: dict[str, list[float]] = defaultdict(list)
    for name, seconds in run["calls"]:
        by_call[name].append(seconds)
    trials = [t for t in run["trials"] if "trial_wall_s" in t["metrics"]]  # ok and infeasible: both logged
    if not any(t["outcome"] == "ok" for t in trials) or not by_call.get("end_trial"):
        raise RuntimeError(f"the sweep must finish trials and log them; got outcomes "
                           f"{[t['outcome'] for t in trials]}, calls {sorted(by_call)}")
    trial_s = sum(t["metrics"]["trial_wall_s"] for t in trials)
    per_trial_s = sum(sum(by_call[c]) for c in PER_TRIAL)
    one_off_s = run["import_mlflow_s"] + sum(sum(v) for c, v in by_call.items() if c not in PER_TRIAL)
    return {"trials": len(by_call["end_trial"]), "trial_s": trial_s, "wall_s": run["wall_s"],
            "per_trial_s": per_trial_s, "per_trial_share": per_trial_s / trial_s, "one_off_s": one_off_s,
            "sweep_share": (per_trial_s + one_off_s) / run["wall_s"], "import_mlflow_s": run["import_mlflow_s"],
            "calls": {c: (len(v), sum(v), statistics.median(v)) for c, v in sorted(by_call.items())}}


def render(command: str, n: int, overrides: list[str], r: dict, load: tuple[str, str]) -> str:
    lines = [
        SECTION, "",
        f"Command: `{command}`  ",
        f"Config: `python -m search multirun hydra.sweeper.n_trials={n}{''.join(' ' + o for o in overrides)}` "
        "(the default space and budget), MLflow on a fresh local SQLite database  ",
        f"Machine: {machine_line()}  ",
        f"Date: {dt.date.today().isoformat()}; load average (1/5/15 min) before {load[0]}, after {load[1]}", "",
        f"**Per trial, MLflow took {r['per_trial_share']:.2%} of trial time** (goal <= {GOAL:.0%}: "
        f"{'met' if r['per_trial_share'] <= GOAL else 'not met'}): {r['per_trial_s']:.2f} s over {r['trials']} "
        f"trials of {r['trial_s']:.1f} s in all. Counting the once-per-sweep part too ({r['one_off_s']:.1f} s: "
        f"importing MLflow {r['import_mlflow_s']:.1f} s, creating the database and the parent run), MLflow took "
        f"{r['sweep_share']:.1%} of the sweep's {r['wall_s']:.1f} s wall time.", "",
        "| call | count | total s | median s |",
        "| --- | --- | --- | --- |",
        f"| import mlflow | 1 | {r['import_mlflow_s']:.2f} | {r['import_mlflow_s']:.2f} |",
        *[f"| tracking.{c} | {k} | {total:.2f} | {med:.3f} |" for c, (k, total, med) in r["calls"].items()],
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the sweep")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 tiny trials; checks the benchmark works")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    parser.add_argument("--note", default="", help="a paragraph for the doc, e.g. what else ran on the machine")
    args = parser.parse_args(argv)
    n = 2 if args.quick else args.trials
    if n < 1:
        print(f"logging_cost: --trials must be >= 1; got {n}; fix: --trials 5", file=sys.stderr)
        return 2
    overrides = (QUICK_OVERRIDES if args.quick else []) + args.overrides
    load_before = load_averages()
    r = measure(n, overrides)
    load_after = load_averages()
    for c, (k, total, med) in r["calls"].items():
        print(f"tracking.{c:18s} {k:3d} calls  {total:6.2f} s  median {med:.3f} s")
    print(f"per trial: MLflow {r['per_trial_share']:.2%} of trial time (goal <= {GOAL:.0%}); whole sweep: "
          f"{r['sweep_share']:.1%} of {r['wall_s']:.1f} s; load average before {load_before}, after {load_after}")
    if not args.quick and not args.no_write:
        shown = [a for i, a in enumerate(argv) if a != "--note" and (i == 0 or argv[i - 1] != "--note")]
        command = "python scripts/bench/logging_cost.py" + "".join(f" {a}" for a in shown)
        write_section(SECTION, render(command, n, overrides, r, (load_before, load_after))
                      + (f"\n{args.note}\n" if args.note else ""))
        update_summary("Logging cost", f"{r['per_trial_share']:.2%} per trial; {r['sweep_share']:.1%} of the sweep "
                       f"with one-off costs (load {load_before})", r["per_trial_share"] <= GOAL)
        print("updated docs/BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

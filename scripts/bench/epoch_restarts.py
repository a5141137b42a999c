"""Epoch restarts: what the loader's restart at an epoch end costs, and what the throughput charges for it.

A trial's throughput is the median of its timed windows, with each window's own
loader restarts replaced by the run's mean restart spread over an epoch's steps
(objectives/timing.py). This runs loader configurations alternately, each as a
plain in-process trial (objectives.run_trial, the default digits workload), and
shows three figures per run: the throughput as trials report it (charged), the
rate between epoch ends (`throughput_between_epoch_ends_samples_per_s`), and the
whole timed span's samples over its seconds (end to end, every restart it held
included). Charged should sit near end to end; the rate between epoch ends
is what the plain median read before restarts were charged, when they fell in
a minority of windows.

    python scripts/bench/epoch_restarts.py            # 3 rounds -> docs/BENCHMARKS.md
    python scripts/bench/epoch_restarts.py --quick    # 1 round of tiny runs, the doc untouched
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchdoc import write_section  # noqa: E402

SECTION = "## Epoch restarts"
ARMS = {
    "no workers": {"loader": {"num_workers": 0}},
    "2 workers": {"loader": {"num_workers": 2, "persistent_workers": False}},
    "2 persistent workers": {"loader": {"num_workers": 2, "persistent_workers": True}},
}


def one_run(arm: dict, budget_samples: int) -> dict[str, float]:
    from objectives import run_trial

    result = run_trial({**arm, "train": {"budget_samples": budget_samples}}, warn=False)
    if result.outcome != "ok":
        raise SystemExit(f"epoch_restarts: a run ended {result.outcome}: {result.reason}")
    m = result.metrics
    span_s = m["timed_end_unix_s"] - m["timed_start_unix_s"]  # no evaluation pauses in a plain run
    return {"charged": m["throughput_samples_per_s"], "between": m["throughput_between_epoch_ends_samples_per_s"],
            "end_to_end": m["timed_samples"] / span_s, "restart_ms": 1000 * m["loader_epoch_restart_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget-samples", type=int, default=8000)
    parser.add_argument("--quick", action="store_true", help="1 round of 1,500-sample runs; docs untouched")
    args = parser.parse_args()
    rounds, budget = (1, 1500) if args.quick else (args.rounds, args.budget_samples)
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in ARMS}
    for r in range(rounds):  # arms alternate, the order reversed every other round
        for name in (list(ARMS) if r % 2 == 0 else list(ARMS)[::-1]):
            runs[name].append(one_run(ARMS[name], budget))
            row = runs[name][-1]
            print(f"round {r + 1} {name:22s} charged {row['charged']:7.1f}  between epoch ends {row['between']:7.1f}  "
                  f"end to end {row['end_to_end']:7.1f}  restart {row['restart_ms']:6.1f} ms", flush=True)
    lines = ["| loader | charged (reported) | between epoch ends | end to end | between / end to end | "
             "charged / end to end | one restart |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, rows in runs.items():
        med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
        ratio_between = statistics.median(row["between"] / row["end_to_end"] for row in rows)
        ratio_charged = statistics.median(row["charged"] / row["end_to_end"] for row in rows)
        lines.append(f"| {name} | {med['charged']:,.0f} | {med['between']:,.0f} | {med['end_to_end']:,.0f} | "
                     f"{ratio_between:.3f} | {ratio_charged:.3f} | {med['restart_ms']:.0f} ms |")
    table = "\n".join(lines)
    print(table)
    if args.quick:
        return
    load_after = os.getloadavg()
    text = (f"Command: `python scripts/bench/epoch_restarts.py --rounds {rounds} --budget-samples {budget}`  \n"
            f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical cores; "
            f"Python {platform.python_version()}  \nDate: {dt.date.today().isoformat()}; load "
            f"{' / '.join(f'{x:.2f}' for x in load_before)} before, {' / '.join(f'{x:.2f}' for x in load_after)} "
            f"after\n\nThe default digits workload (batch 64, 22.5 steps an epoch), {budget:,} samples a run, "
            f"{rounds} rounds, arms alternating; medians over the rounds (samples/s).\n\n{table}\n")
    write_section(SECTION, text)


if __name__ == "__main__":
    main()

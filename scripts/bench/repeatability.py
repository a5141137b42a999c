"""Repeatability: does one configuration measure the same throughput every time?

A sweep can only rank configurations whose differences exceed the noise of
measuring one of them, so this runs ONE configuration N times, each in a
fresh isolated child exactly as a sweep trial runs (search.isolate.run_isolated
on the config composed from conf/), and reports the median throughput, the
coefficient of variation (CV) across runs, and each run's CV across its own
timed windows. Goal (issue 4): CV across runs <= 3% on a CPU, <= 1% on a GPU.

    python scripts/bench/repeatability.py                 # 5 runs of the default digits config -> docs/BENCHMARKS.md
    python scripts/bench/repeatability.py --quick         # 2 tiny runs, < 60 s, fails only when measuring is broken
    python scripts/bench/repeatability.py batch_size=128  # any Hydra overrides
"""
from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchdoc import DOC, update_summary, write_section  # noqa: E402

SECTION = "## Repeatability"
DEFAULT_OVERRIDES = ["train.budget_samples=8000", "batch_size=64", "loader.num_workers=0", "parallel.threads=1"]
QUICK_OVERRIDES = ["train.budget_samples=640", "train.warmup_steps=2", "train.window_steps=2"]
GOAL_CV = {"cpu": 0.03, "gpu": 0.01}


def compose(overrides: list[str]) -> dict:
    from hydra import compose as hydra_compose, initialize_config_dir
    from omegaconf import OmegaConf

    from search.paths import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = hydra_compose("config", overrides=overrides)
    out = OmegaConf.to_container(cfg, resolve=True)
    out.pop("hydra", None)
    return out


def busy_cores(seconds: float) -> float:
    """Cores kept busy by every process on the machine, averaged over `seconds`."""
    import psutil

    return psutil.cpu_percent(interval=seconds) / 100 * psutil.cpu_count()


def wait_until_quiet(max_wait_s: float, quiet_cores: float = 0.3) -> float:
    """Other jobs share this CPU: start a run only once they have (mostly) stopped."""
    deadline = time.monotonic() + max_wait_s
    busy = busy_cores(1.0)
    while busy > quiet_cores and time.monotonic() < deadline:
        busy = busy_cores(2.0)
    return busy


def measure_once(cfg: dict, number: int, max_wait_s: float) -> dict:
    import psutil

    from search.trial.isolate import run_isolated

    busy_before = wait_until_quiet(max_wait_s) if max_wait_s > 0 else busy_cores(0.5)
    psutil.cpu_percent(None)
    result = run_isolated(cfg, timeout_s=float(cfg["trial"]["timeout_s"]))
    busy_during = psutil.cpu_percent(None) / 100 * psutil.cpu_count()
    m = result.get("metrics", {})
    own = m.get("cpu_util_percent_mean", 0.0) / 100  # the trial's process tree, sampled by isolate
    row = {"run": number, "outcome": result.get("outcome"), "reason": result.get("reason", ""),
           "throughput_samples_per_s": m.get("throughput_samples_per_s"), "window_cv": m.get("throughput_cv"),
           "windows": m.get("throughput_windows"), "trial_wall_s": m.get("trial_wall_s"),
           "busy_cores_before": busy_before, "other_cores_during": max(0.0, busy_during - own), "kept": True}
    shown = f"{row['throughput_samples_per_s']:.1f} samples/s, window CV {row['window_cv']:.2%}" \
        if row["throughput_samples_per_s"] else f"{row['outcome']}: {row['reason']}"
    print(f"run {number}: {shown}, {row['trial_wall_s']:.1f} s, cores busy before {busy_before:.2f}, "
          f"other processes during {row['other_cores_during']:.2f} cores", flush=True)
    return row


def measure(cfg: dict, runs: int, max_wait_s: float, rerun_above_cores: float | None) -> list[dict]:
    """`runs` kept runs; a run during which other processes used more than
    `rerun_above_cores` is repeated once, and both stay in the table."""
    rows = []
    for i in range(1, runs + 1):
        row = measure_once(cfg, i, max_wait_s)
        rows.append(row)
        if rerun_above_cores is not None and row["other_cores_during"] > rerun_above_cores and row["outcome"] == "ok":
            row["kept"] = False
            print(f"run {i} shared the CPU with other processes; measuring it once more", flush=True)
            rows.append(measure_once(cfg, i, max_wait_s))
    return rows


def summary(rows: list[dict]) -> dict:
    kept = [r for r in rows if r["kept"]]
    values = [r["throughput_samples_per_s"] for r in kept]
    every = [r["throughput_samples_per_s"] for r in rows]
    return {"median": statistics.median(values), "cv": _cv(values), "cv_every_run": _cv(every),
            "min": min(values), "max": max(values), "repeated": len(rows) - len(kept),
            "window_cv_median": statistics.median(r["window_cv"] for r in kept)}


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def render(command: str, overrides: list[str], rows: list[dict], s: dict, device: str, note: str) -> str:
    from search.measure import fingerprint

    fp = fingerprint.collect()
    machine = fp["gpu_name"] if device == "gpu" else f"{fp['cpu_model']}, {fp['cpu_count']} logical cores"
    goal = GOAL_CV[device]
    verdict = "meets" if s["cv"] <= goal else "MISSES"
    lines = [
        SECTION, "",
        f"Command: `{command}`  ",
        f"Config: default digits objective, `{' '.join(overrides)}`  ",
        f"Machine: {machine}; torch {fp['torch_version']}, Python {fp['python_version']}, {fp['os']}  ",
        f"Date: {dt.date.today().isoformat()}", "",
        f"**Median {s['median']:.1f} samples/s, CV across {len(rows) - s['repeated']} runs {s['cv']:.2%}** "
        f"({verdict} the {goal:.0%} goal for a {device.upper()}); range {s['min']:.1f}-{s['max']:.1f}; "
        f"median CV across one run's timed windows {s['window_cv_median']:.2%}. CV across runs is the sample "
        "standard deviation over the mean; the throughput of a run is the median of its timed windows."
        + (f" {s['repeated']} run(s) shared the CPU with other processes (last column) and were measured once "
           f"more; counting every run, the CV is {s['cv_every_run']:.2%}." if s["repeated"] else ""), "",
        "| run | samples/s | window CV | windows | trial wall s | cores busy before | other processes' cores during |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *[f"| {r['run']}{'' if r['kept'] else ' (disturbed, not counted)'} | {r['throughput_samples_per_s']:.1f} | "
          f"{r['window_cv']:.2%} | {r['windows']:.0f} | {r['trial_wall_s']:.1f} | {r['busy_cores_before']:.2f} | "
          f"{r['other_cores_during']:.2f} |" for r in rows],
        "",
    ]
    if note:
        lines += [note, ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides on top of the benchmark's defaults")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 runs at a tiny budget; checks that measuring works")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    parser.add_argument("--wait-quiet-s", type=float, default=120.0,
                        help="before each run, wait up to this long for other processes to leave the CPU (0: don't)")
    parser.add_argument("--rerun-above-cores", type=float, default=0.3,
                        help="repeat a run once when other processes used more cores than this during it "
                             "(negative: never)")
    parser.add_argument("--note", default="", help="a sentence for the doc, e.g. what else ran on the machine")
    args = parser.parse_args(argv)

    overrides = DEFAULT_OVERRIDES + (QUICK_OVERRIDES if args.quick else []) + args.overrides
    runs = 2 if args.quick else args.runs
    if runs < 2:
        print(f"repeatability: --runs must be >= 2 to have a spread; got {runs}; fix: --runs 5", file=sys.stderr)
        return 2
    cfg = compose(overrides)
    started = time.perf_counter()
    rerun = None if args.quick or args.rerun_above_cores < 0 else args.rerun_above_cores
    rows = measure(cfg, runs, 0.0 if args.quick else args.wait_quiet_s, rerun)
    broken = [r for r in rows if r["outcome"] != "ok" or not r["throughput_samples_per_s"]]
    if broken:
        print(f"repeatability: every run must finish ok with a throughput; run {broken[0]['run']} ended "
              f"{broken[0]['outcome']}: {broken[0]['reason']}", file=sys.stderr)
        return 1
    s = summary(rows)
    from search.measure import gpu_telemetry

    device = "cpu" if gpu_telemetry.notice() else "gpu"
    print(f"median {s['median']:.1f} samples/s, CV across runs {s['cv']:.2%} (goal <= {GOAL_CV[device]:.0%} on "
          f"{device}), median window CV {s['window_cv_median']:.2%}, {time.perf_counter() - started:.0f} s")
    if not args.quick and not args.no_write:
        shown = [a for i, a in enumerate(argv) if a != "--note" and (i == 0 or argv[i - 1] != "--note")
                 and not a.startswith("--note=")]
        command = "python scripts/bench/repeatability.py" + "".join(f" {a}" for a in shown)
        write_section(SECTION, render(command, overrides, rows, s, device, args.note))
        update_summary(f"Repeatability: CV of throughput across runs, {device.upper()}", f"{s['cv']:.2%}",
                       s["cv"] <= GOAL_CV[device])
        print(f"updated {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

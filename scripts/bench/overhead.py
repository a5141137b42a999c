"""Service overhead: the share of a sweep's wall time spent outside training
and evaluation, against two other ways of running the same trials.

Three runners, each in its own fresh interpreter, run the same N trials
(the same composed digits config, `train.seed` 0..N-1 so no configuration
repeats), timed from process start to exit from outside:

- `search`: `python -m search multirun` (Optuna journal storage, MLflow on
  SQLite, every trial in an isolated child forked from a forkserver);
- `optuna loop`: a plain in-process Optuna loop calling objectives.run_trial
  (no isolation, no tracking, in-memory storage);
- `spawn`: the same Optuna loop starting a new Python interpreter per trial
  (full isolation the naive way: every trial imports torch again).

Inside time is what each trial reports itself: train_wall_s + eval_wall_s.
Everything else (interpreter start, imports, building the workload, sampler,
storage, MLflow, process start) is overhead. Goal (issue 9): at most 2% for
~10-second trials while keeping full process isolation.

    python scripts/bench/overhead.py            # 5 trials of ~10 s per runner -> docs/BENCHMARKS.md
    python scripts/bench/overhead.py --quick    # 1 tiny trial per runner, < 40 s
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchdoc import load_averages, machine_line, update_summary, write_section  # noqa: E402

SECTION = "## Service overhead"
# ~10 s of training at ~1400 samples/s on one core of this machine.
OVERRIDES = ["train.budget_samples=14000", "batch_size=64", "loader.num_workers=0", "parallel.threads=1"]
QUICK_OVERRIDES = ["train.budget_samples=320", "train.warmup_steps=1", "train.window_steps=2"]
GOAL = 0.02
_CHILD = ("import json, sys, objectives; cfg = json.load(open(sys.argv[1])); "
          "json.dump(objectives.run_trial(cfg).to_dict(), open(sys.argv[2], 'w'))")


def run_search(n: int, overrides: list[str], workdir: Path) -> dict:
    from timed_sweep import run_timed_sweep

    _create_mlflow_db(workdir)
    seeds = ",".join(str(i) for i in range(n))
    return run_timed_sweep(["multirun", "hydra.sweeper.params=null", f"train.seed=choice({seeds})",
                            f"hydra.sweeper.n_trials={n}", *overrides], workdir)


def _create_mlflow_db(workdir: Path) -> None:
    """A sweep on a machine that has swept before finds MLflow's database; only the
    very first one pays its schema creation (timed separately, in the table's note)."""
    code = "import mlflow; mlflow.MlflowClient().search_experiments()"
    subprocess.run([sys.executable, "-c", code], cwd=workdir, check=True, capture_output=True,
                   env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db"})


def run_other(runner: str, n: int, cfg: dict, workdir: Path) -> dict:
    cfg_path = workdir / "cfg.json"
    cfg_path.write_text(json.dumps(cfg))
    out = workdir / "result.json"
    started_unix, started = time.time(), time.perf_counter()
    subprocess.run([sys.executable, __file__, "--runner", runner, "--trials", str(n), "--cfg", str(cfg_path),
                    "--result", str(out)], cwd=workdir, check=True)
    return {"wall_s": time.perf_counter() - started, "started_unix_s": started_unix, **json.loads(out.read_text())}


def optuna_loop(n: int, cfg_path: Path, result_path: Path, spawn: bool) -> None:
    """The alternatives, run inside their own interpreter: ask, run the trial, tell."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if not spawn:
        import objectives
    cfg = json.loads(cfg_path.read_text())
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.TPESampler(seed=0))
    trials = []
    for seed in range(n):
        study.enqueue_trial({"train.seed": seed})
        trial = study.ask({"train.seed": optuna.distributions.CategoricalDistribution(list(range(n)))})
        start = time.time()
        cfg["train"]["seed"] = trial.params["train.seed"]
        if spawn:
            with tempfile.TemporaryDirectory() as tmp:
                Path(tmp, "cfg.json").write_text(json.dumps(cfg))
                subprocess.run([sys.executable, "-c", _CHILD, f"{tmp}/cfg.json", f"{tmp}/out.json"], check=True)
                result = json.loads(Path(tmp, "out.json").read_text())
        else:
            result = objectives.run_trial(cfg).to_dict()
        m = result["metrics"]
        study.tell(trial, [m["throughput_samples_per_s"], m["val_accuracy"]])
        trials.append({"metrics": m, "outcome": result["outcome"], "start_unix_s": start, "end_unix_s": time.time()})
    result_path.write_text(json.dumps({"trials": trials}))


def summarise(run: dict, n: int) -> dict:
    trials = [t for t in run["trials"] if t["outcome"] == "ok"]
    if len(trials) != n:
        raise RuntimeError(f"every runner must finish its {n} trials ok; got {len(trials)}")
    inside = sum(t["metrics"]["train_wall_s"] + t["metrics"].get("eval_wall_s", 0.0) for t in trials)
    first = min(t["start_unix_s"] for t in trials) - run["started_unix_s"]
    last = max(t["end_unix_s"] for t in trials) - run["started_unix_s"]
    between = (last - first - inside) / n  # per trial, from the first trial's start to the last one's end
    return {"wall_s": run["wall_s"], "inside_s": inside, "overhead": 1 - inside / run["wall_s"],
            "startup_s": first, "per_trial_s": (run["wall_s"] - first - inside) / n,
            "between_s": between, "after_s": run["wall_s"] - last,
            "steady": between / (between + inside / n), "train_s_per_trial": inside / n}


def render(command: str, n: int, overrides: list[str], rows: dict[str, dict], load: tuple[str, str],
           db_s: float) -> str:
    import datetime as dt

    ours, loop = rows["search"], rows["optuna loop"]
    lines = [
        SECTION, "",
        f"Command: `{command}`  ",
        f"Config: {n} trials per runner, default digits objective, `{' '.join(overrides)}`, `train.seed` 0..{n - 1}  ",
        f"Machine: {machine_line()}  ",
        f"Date: {dt.date.today().isoformat()}; load average (1/5/15 min) before {load[0]}, after {load[1]}", "",
        f"**search: {ours['overhead']:.1%} of the sweep's wall time outside training and evaluation** "
        f"(goal <= {GOAL:.0%}: {'met' if ours['overhead'] <= GOAL else 'not met'}); the plain in-process Optuna "
        f"loop {loop['overhead']:.1%}, interpreter per trial {rows['spawn']['overhead']:.1%}. The sweep took "
        f"{ours['wall_s'] / loop['wall_s']:.2f}x the plain loop's wall time and "
        f"{ours['wall_s'] / rows['spawn']['wall_s']:.2f}x the spawning runner's.", "",
        f"Per trial, once started: {ours['between_s']:.2f} s outside training and evaluation, "
        f"{ours['steady']:.1%} of a trial (the plain loop {loop['between_s']:.2f} s, {loop['steady']:.1%}): "
        "the share a long sweep tends to, once its start-up and its end are spread over many trials.", "",
        "| runner | wall s | train+eval s | outside share | before first trial s | per trial outside s | "
        "per trial, once started s | after last trial s | wall vs optuna loop |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *[f"| {name} | {r['wall_s']:.1f} | {r['inside_s']:.1f} | {r['overhead']:.1%} | {r['startup_s']:.1f} | "
          f"{r['per_trial_s']:.2f} | {r['between_s']:.2f} ({r['steady']:.1%}) | {r['after_s']:.1f} | "
          f"{r['wall_s'] / loop['wall_s']:.2f}x |" for name, r in rows.items()],
        "",
        "Before first trial: interpreter start and imports (and for the sweep: Hydra composition, the knob checks, "
        "storage, MLflow's parent run). Per trial outside: everything after that, over the trials. Per trial, once "
        "started: from the first trial's start to the last one's end, what is not training or evaluation "
        "(building the workload, the forked child, sampler, storage, MLflow), over the trials. After last trial: "
        "the sweep's end (for the sweep: the Pareto table, the report's plots, MLflow's parent run). The MLflow "
        f"database existed before the timed sweep; creating it took {db_s:.1f} s once.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 tiny trial per runner; checks the benchmark works")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    parser.add_argument("--note", default="", help="a paragraph for the doc, e.g. what else ran on the machine")
    parser.add_argument("--runner", choices=["optuna-loop", "spawn"], help=argparse.SUPPRESS)
    parser.add_argument("--cfg", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runner:
        optuna_loop(args.trials, args.cfg, args.result, spawn=args.runner == "spawn")
        return 0
    n = 1 if args.quick else args.trials
    if n < 1:
        print(f"overhead: --trials must be >= 1; got {n}; fix: --trials 5", file=sys.stderr)
        return 2
    overrides = OVERRIDES + (QUICK_OVERRIDES if args.quick else [])
    from repeatability import compose

    cfg = compose(overrides)
    load_before = load_averages()
    rows, db_s = {}, 0.0
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        for name in ("search", "optuna loop", "spawn"):
            workdir = Path(tmp, name.replace(" ", "-"))
            workdir.mkdir()
            if name == "search":
                if not args.quick:
                    t0 = time.perf_counter()
                    _create_mlflow_db(Path(tmp))  # a throwaway database: what the very first sweep pays once
                    db_s = time.perf_counter() - t0
                run = run_search(n, overrides, workdir)
            else:
                run = run_other(name.replace(" ", "-"), n, cfg, workdir)
            rows[name] = summarise(run, n)
            r = rows[name]
            print(f"{name:12s} wall {r['wall_s']:6.1f} s  train+eval {r['inside_s']:6.1f} s  outside "
                  f"{r['overhead']:6.1%}  before first trial {r['startup_s']:5.1f} s  per trial outside "
                  f"{r['per_trial_s']:.2f} s  (once started {r['between_s']:.2f} s = {r['steady']:.1%})  "
                  f"after last trial {r['after_s']:.1f} s", flush=True)
    load_after = load_averages()
    print(f"load average before {load_before}, after {load_after}")
    if not args.quick and not args.no_write:
        shown = [a for i, a in enumerate(argv) if a != "--note" and (i == 0 or argv[i - 1] != "--note")]
        command = "python scripts/bench/overhead.py" + "".join(f" {a}" for a in shown)
        write_section(SECTION, render(command, n, overrides, rows, (load_before, load_after), db_s)
                      + (f"\n{args.note}\n" if args.note else ""))
        ours = rows["search"]["overhead"]
        update_summary("Service overhead", f"{ours:.1%} of a {n}-trial sweep, {rows['search']['steady']:.1%} per "
                       f"trial once started (plain Optuna loop {rows['optuna loop']['overhead']:.1%} and "
                       f"{rows['optuna loop']['steady']:.1%}, interpreter per trial {rows['spawn']['overhead']:.1%}; "
                       f"load {load_before})", ours <= GOAL)
        print("updated docs/BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Early stopping: how much sweep time it saves, and whether it changes the answer.

Runs the same digits sweep twice, with early stopping (the default) and with
`hydra.sweeper.early_stopping=false`, each through the real CLI in its own
throwaway directory, and reports both wall times and whether the answer is
the same: the Pareto front (default, two objectives) or the constrained best
(`--mode constrained`: maximize throughput subject to `val_accuracy >= 0.9`,
Optuna's median pruner on the accuracy curve).

Both sweeps use Optuna's random sampler with one seed, so they propose the
same configurations whatever the results were (TPE would learn from stopped
trials differently and the two sweeps would search different places). The
fronts are compared as sets of configurations; throughput noise can move a
configuration on or off a front between two runs even without early
stopping, so a configuration on the front of the full sweep that early
stopping stopped is counted separately: that one would be a wrong stop.

    python scripts/bench/early_stopping.py                      # 30 trials, default budget -> docs/BENCHMARKS.md
    python scripts/bench/early_stopping.py --mode constrained   # the same for the constraint mode
    python scripts/bench/early_stopping.py --quick              # 4 tiny trials each, well under a minute
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "BENCHMARKS.md"
SECTION = "## Early stopping"
COMMON = ["hydra/sweeper/sampler=random", "hydra.sweeper.seed=0"]
MODES = {
    "pareto": [],
    "constrained": ["hydra.sweeper.metrics=[throughput_samples_per_s]", "hydra.sweeper.direction=maximize",
                    "hydra.sweeper.constraints=['val_accuracy >= 0.9']"],
}
QUICK = ["hydra.sweeper.n_trials=4", "hydra.sweeper.early_stopping_startup_trials=1",
         "train.budget_samples=640", "train.probe_steps=5", "train.window_steps=5",
         "hydra.sweeper.params=null", "objective.image_size_px=choice(16,32,96)", "batch_size=choice(32,64)"]


def sweep(overrides: list[str], early_stopping: bool) -> dict:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    with tempfile.TemporaryDirectory(prefix="bench-early-stopping-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db"}
        args = [sys.executable, "-m", "search", "multirun", *COMMON, *overrides,
                f"hydra.sweeper.early_stopping={str(early_stopping).lower()}"]
        started = time.perf_counter()
        done = subprocess.run(args, cwd=tmp, env=env, text=True, capture_output=True)
        wall_s = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"sweep failed ({done.returncode}): {done.stderr[-2000:]}")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.load_study(study_name="digits",
                                  storage=JournalStorage(JournalFileBackend(f"{tmp}/optuna.journal")))
        from search.reports.tables import front_trials

        trials = [t for t in study.trials if t.user_attrs.get("outcome") != "skipped"]
        return {
            "wall_s": wall_s,
            "trials": len(trials),
            "stopped": {_key(t.params) for t in trials if t.user_attrs.get("outcome") == "stopped_early"},
            "front": {_key(t.params) for t in (front_trials(study)[:1] if len(study.directions) == 1
                                               else front_trials(study))},
            "train_wall_s": sum(t.user_attrs.get("metrics", {}).get("trial_wall_s", 0.0) for t in trials),
            # the work done, in samples trained: unlike wall time, other processes on the machine do not change it
            "samples": sum(t.user_attrs.get("metrics", {}).get("samples_trained", 0.0) for t in trials),
        }


def _key(params: dict) -> str:
    return " ".join(f"{k.split('.')[-1]}={v}" for k, v in sorted(params.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="pareto")
    parser.add_argument("--quick", action="store_true", help="4 tiny trials per sweep; prints, writes nothing")
    parser.add_argument("--note", default="", help="a paragraph written under the table")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for both sweeps")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from benchdoc import load_averages, machine_line

    overrides = MODES[args.mode] + (QUICK if args.quick else ["hydra.sweeper.n_trials=30"]) + args.overrides
    load_before = load_averages()
    on = sweep(overrides, early_stopping=True)
    off = sweep(overrides, early_stopping=False)
    load_after = load_averages()
    answer = "Pareto front" if args.mode == "pareto" else "constrained best"
    wrong_stops = off["front"] & on["stopped"]
    lines = [
        f"| sweep | wall s | trials run | stopped early | summed trial wall s | samples trained | {answer} |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(f"| {name} | {r['wall_s']:.1f} | {r['trials']} | {len(r['stopped'])} | {r['train_wall_s']:.1f} | "
          f"{r['samples']:.0f} | "
          f"{'; '.join(sorted(r['front'])) or '(none)'} |" for name, r in (("with early stopping", on),
                                                                            ("without", off))),
    ]
    saved = 1 - on["wall_s"] / off["wall_s"]
    summary = (f"**{answer} {'the same' if on['front'] == off['front'] else 'differs'}**; early stopping saved "
               f"{saved:.0%} of the sweep's wall time ({off['wall_s']:.0f} s -> {on['wall_s']:.0f} s) and "
               f"{1 - on['samples'] / max(off['samples'], 1):.0%} of the samples trained; "
               f"configurations on the full sweep's {answer} that early stopping stopped: {len(wrong_stops)}.")
    print("\n".join(lines))
    print(summary)
    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}")
    if args.quick:
        return
    command = "python scripts/bench/early_stopping.py" + (f" --mode {args.mode}" if args.mode != "pareto" else "")
    block = "\n".join([
        f"### {answer} ({args.mode})", "",
        f"Command: `{command}` (both sweeps: `{' '.join(COMMON + overrides)}`)  ",
        f"Machine: {machine_line()}  ",
        f"Date: {dt.date.today().isoformat()}; load average (1, 5, 15 min) {load_before} before, "
        f"{load_after} after", "",
        summary, "", *lines, "", *( [args.note, ""] if args.note else []),
    ])
    write_section(block, args.mode)


def write_section(block: str, mode: str) -> None:
    """Replace this mode's block under the section (or append it), leaving the rest of the file alone."""
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if SECTION not in text:
        text = text.rstrip("\n") + f"\n\n{SECTION}\n\nMeasured by scripts/bench/early_stopping.py.\n"
    head, _, tail = text.partition(SECTION)
    nxt = re.search(r"^## ", tail, flags=re.M)
    body, rest = (tail[:nxt.start()], tail[nxt.start():]) if nxt else (tail, "")
    pattern = re.compile(rf"^### [^\n]*\({mode}\)\n.*?(?=^### |\Z)", flags=re.M | re.S)
    body = pattern.sub(lambda _: block + "\n", body) if pattern.search(body) else body.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(head + SECTION + body + ("\n" + rest if rest else ""))


if __name__ == "__main__":
    main()

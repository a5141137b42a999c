"""Wall time to a confirmed answer, and the confirmation's repeatability.

Sweeps of the default space (digits, CPU), each in its own directory, run one
after the other in alternation (A B A B ...), so the machine's drift and a
neighbour's load fall on both arms alike:

- **answer**: today's default, `python -m search multirun`: the baseline,
  early stopping, staging, and the confirmation.
- **no saving**: the same with `hydra.sweeper.early_stopping=false
  hydra.sweeper.staging=false hydra.sweeper.patience_trials=null`: every
  trial trains its whole budget and every one of n_trials runs, as the
  default sweep did before any of the three. Its answer is confirmed the
  same way, so the two arms' answers compare.

Per sweep: the process's wall time, the search's and the confirmation's
(from the answer stored on the study), the answer and its speedup with its
95% interval. The saving is 1 - answer's wall / no saving's, per pair, for
the search alone and for the whole sweep (the command, start to end).
Two `answer` sweeps agree when their intervals overlap; every pair of them is compared.
With `--before-tree DIR` (a checkout of earlier code), each pair also runs the `answer` arm from there, between
the two arms, so a change's saving is measured against the code before it in the same run.

    python scripts/bench/answer_wall.py            # 2 pairs, n_trials=20 -> docs/BENCHMARKS.md
    python scripts/bench/answer_wall.py --quick    # 1 pair, n_trials=3, budget_samples 1000, no report, ~1 min
    python scripts/bench/answer_wall.py --pairs 3 --before-tree ../old --no-write
    python scripts/bench/answer_wall.py --keep runs/   # each sweep's directory kept (<pair>-<arm number>), to trace one
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchdoc import load_averages, machine_line, write_section  # noqa: E402

SECTION = "## Wall time to a confirmed answer"
ARMS = {"answer": [], "no saving": ["hydra.sweeper.early_stopping=false", "hydra.sweeper.staging=false",
                                    "hydra.sweeper.patience_trials=null"]}
BEFORE = "answer, code before"  # the `answer` arm from --before-tree


def run_sweep(extra: list[str], workdir: Path, timeout_s: float, tree: Path = REPO) -> dict:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    env = {**os.environ, "PYTHONPATH": str(tree), "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db",
           "SEARCH_GPU_DEFAULT": "0"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "search", "multirun", *extra], cwd=workdir, env=env, text=True,
                          capture_output=True, timeout=timeout_s)
    wall_s = time.perf_counter() - start
    (workdir / "sweep.out").write_text(proc.stdout + proc.stderr)  # what the terminal showed (kept with --keep)
    if proc.returncode != 0:
        raise RuntimeError(f"the sweep exited {proc.returncode}: {(proc.stderr or proc.stdout)[-2000:]}")
    storage = JournalStorage(JournalFileBackend(str(workdir / "optuna.journal")))
    [name] = optuna.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    answer = study.user_attrs.get("search.answer") or {}
    trials = study.get_trials(deepcopy=False)
    baseline = next((t.params for t in trials if t.user_attrs.get("search.trial_role") == "baseline"), {})
    if answer:
        answer["changed"] = " ".join(f"{k}={v}" for k, v in answer["params"].items() if baseline.get(k) != v)
    return {"wall_s": wall_s, "search_wall_s": answer.get("search_wall_s"),
            "confirm_wall_s": answer.get("confirm_wall_s"), "trials": len(trials),
            "throughput_only": sum(1 for t in trials if "search.accuracy_from" in t.user_attrs),
            "stopped_early": sum(1 for t in trials if t.user_attrs.get("outcome") == "stopped_early"),
            "answer": answer}


def _answer_text(a: dict) -> str:
    if not a:
        return "none"
    if a.get("is_baseline"):
        return "your configuration" + (f" ({a['note']})" if a.get("note") else "")
    return f"{a['changed']}: {a['speedup']:.2f}x ({a['ci_low']:.2f}-{a['ci_high']:.2f}, {a['rounds']} rounds)"


def _shown_args(argv: list[str]) -> str:
    """The command's arguments as the doc shows them: the earlier checkout's folder and the kept sweeps' as DIR
    (a path of this machine means nothing to a reader)."""
    folders = ("--before-tree", "--keep")

    def shown(i: int, a: str) -> str:
        if i and argv[i - 1] in folders:
            return "DIR"  # --keep DIR
        name = a.split("=")[0]
        return f"{name}=DIR" if name in folders and "=" in a else a  # --keep=DIR
    return "".join(f" {shown(i, a)}" for i, a in enumerate(argv))


def _commit_of(tree: Path) -> str:
    """The earlier checkout as the doc names it: its short commit id, or its folder's name outside git."""
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else tree.name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--n-trials", type=int, default=20)
    parser.add_argument("--budget-samples", type=int, help="train.budget_samples of every sweep (default: conf/'s)")
    parser.add_argument("--before-tree", type=Path, help="a checkout of earlier code: its `answer` arm runs too")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    parser.add_argument("--keep", type=Path, help="keep each sweep's directory (study, MLflow, output) under DIR, "
                                                   "to trace an outlier afterwards")
    args = parser.parse_args()
    arms = {"answer": [], BEFORE: [], "no saving": ARMS["no saving"]} if args.before_tree else ARMS
    pairs, n_trials = (1, 3) if args.quick else (args.pairs, args.n_trials)
    budget = 1000 if args.quick else args.budget_samples
    common = [f"hydra.sweeper.n_trials={n_trials}"] + ([f"train.budget_samples={budget}"] if budget else [])
    if args.quick:  # a smoke run of the script: both arms skip the plot report (tests/conftest.py's NO_REPORT)
        common.append("hydra.sweeper.report=false")
    loads = [load_averages()]
    rows: list[tuple[int, str, dict]] = []
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    kept = contextlib.nullcontext(tempfile.mkdtemp(prefix="answer_wall-", dir=args.keep)) if args.keep else None
    with kept or tempfile.TemporaryDirectory() as tmp:
        for pair in range(pairs):
            for seed, (arm, extra) in enumerate(arms.items()):
                workdir = Path(tmp) / f"{pair}-{seed}"
                workdir.mkdir()
                tree = args.before_tree.resolve() if arm == BEFORE else REPO
                result = run_sweep(common + extra + ["hydra.sweeper.seed=0"], workdir, 3600, tree)  # the same sweep
                rows.append((pair, arm, result))
                print(json.dumps({"pair": pair, "arm": arm, **{k: v for k, v in result.items() if k != "answer"},
                                  "answer": _answer_text(result["answer"])}), flush=True)
    loads.append(load_averages())
    savings, whole_savings, before_savings = [], [], []
    for pair in range(pairs):
        got = {arm: r for p, arm, r in rows if p == pair}
        a, b = got["answer"], got["no saving"]
        if a["search_wall_s"] and b["search_wall_s"]:
            savings.append(1 - a["search_wall_s"] / b["search_wall_s"])
        whole_savings.append(1 - a["wall_s"] / b["wall_s"])  # the command, start to end: confirmation included
        if BEFORE in got:
            before_savings.append(1 - got[BEFORE]["wall_s"] / b["wall_s"])
    answers = [r["answer"] for _, arm, r in rows if arm == "answer" and r["answer"]]
    confirmed = [a for a in answers if not a.get("is_baseline")]
    pairs_of = list(itertools.combinations(confirmed, 2))  # every two `answer` sweeps with a confirmed speedup
    agree = sum(x["ci_low"] <= y["ci_high"] and y["ci_low"] <= x["ci_high"] for x, y in pairs_of)
    same = sum(x["params"] == y["params"] for x, y in pairs_of)
    lines = [SECTION, "",
             f"`python scripts/bench/answer_wall.py{_shown_args(sys.argv[1:])}` on {date.today()}: "
             f"{machine_line()}; load {loads[0]} before, {loads[1]} after. The default space, "
             f"`hydra.sweeper.n_trials={n_trials}`" + (f" `train.budget_samples={budget}`" if budget else "")
             + ", arms run alternately, every sweep at `hydra.sweeper.seed=0`.", "",
             "| pair | arm | wall s | search s | confirmation s | trials (timed only / stopped early) | answer |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for pair, arm, r in rows:
        lines.append(f"| {pair} | {arm} | {r['wall_s']:.0f} | {r['search_wall_s'] or 0:.0f} | "
                     f"{r['confirm_wall_s'] or 0:.0f} | {r['trials']} ({r['throughput_only']} / {r['stopped_early']}) "
                     f"| {_answer_text(r['answer'])} |")
    lines.append("")
    if savings:
        lines.append(f"Search wall time saved by early stopping, staging and the search's patience: "
                     f"{', '.join(f'{s:.0%}' for s in savings)} (median {statistics.median(savings):.0%}); "
                     f"the whole sweep's (the command, start to end, the confirmation's rounds throughput-only "
                     f"or whole trials with the arm): {', '.join(f'{s:.0%}' for s in whole_savings)} "
                     f"(median {statistics.median(whole_savings):.0%}). Goal >= 40%."
                     + (f" The code of {_commit_of(args.before_tree)} (`{BEFORE}`), the whole sweep's against the same "
                        f"pair's `no saving`: {', '.join(f'{s:.0%}' for s in before_savings)} "
                        f"(median {statistics.median(before_savings):.0%})." if before_savings else ""))
    confirm_shares = [r["confirm_wall_s"] / r["search_wall_s"] for _, arm, r in rows
                      if arm == "answer" and r["confirm_wall_s"] and r["search_wall_s"]]
    whole_shares = [r["confirm_wall_s"] / r["wall_s"] for _, arm, r in rows if arm == "answer" and r["confirm_wall_s"]]
    if confirm_shares:
        lines.append(f"Confirmation's cost, as a share of the search's wall time: "
                     f"{', '.join(f'{s:.0%}' for s in confirm_shares)} (budget 15%, hydra.sweeper.confirm_budget); "
                     "of the whole sweep's (the command, start to end): "
                     f"{', '.join(f'{s:.0%}' for s in whole_shares)}.")
    if pairs_of:
        lines.append(f"Repeatability: of the {len(pairs_of)} pair(s) of `answer` sweeps with a confirmed speedup "
                     f"(the same command, sampler seed 0; {len(confirmed)} of {len(answers)} sweeps), {same} gave the "
                     f"same answer and {agree} have overlapping speedup intervals.")
    text = "\n".join(lines)
    print(text)
    if not args.quick and not args.no_write:
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Search efficiency: how many trials each search strategy needs on a grid
measured once on this machine (measure_grid.py), replayed offline.

Every strategy runs through the sweeper's own pieces: the sampler built by
search.study.make_sampler from the same config node `hydra/sweeper/sampler`
selects, search.sweep.no_repeat.ask_unseen (a repeat is skipped and an unseen
configuration runs instead; a skipped repeat costs no trial), and
search.outcome.score/tell (infeasible configurations are told the way a
sweep tells them). A trial's result is looked up in the table instead of
trained, so 30+ seeds take minutes, not days.

Per strategy and seed: the trials until one reaches 95% of the best
throughput among configurations with val_accuracy >= the floor, and the
hypervolume of the (throughput, accuracy) front after 10, 20 and 40 trials,
as a fraction of the whole grid's. Hydra's grid order (BasicSweeper: the
product, last knob fastest) is one fixed sequence, the same for every seed.

    python scripts/bench/search_efficiency.py            # every strategy, 30 seeds -> docs/BENCHMARKS.md
    python scripts/bench/search_efficiency.py --quick    # 2 seeds, 3 strategies, at most 15 trials, < 10 s
"""
from __future__ import annotations

import argparse
import csv
import json
import random
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchdoc import load_averages, update_summary, write_section  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
SECTION = "## Search efficiency"
OPTIMISED_METRICS = ["throughput_samples_per_s", "val_accuracy"]
DIRECTIONS = ["maximize", "maximize"]
HV_AT = (10, 20, 40)
TARGET_FRACTION = 0.95
GOAL_RATIO = 1 / 3  # the default's trials over random search's

# name -> sampler config node, as `hydra/sweeper/sampler=...` plus `hydra.sweeper.sampler.*` would give.
# "default" is read from the sweeper's config store, so this follows a changed default.
STRATEGIES: dict[str, dict | None] = {
    "default": None,
    "random": {"_target_": "optuna.samplers.RandomSampler"},
    "hydra grid order": {"_target_": "hydra-basic-sweeper-order"},
    "optuna grid": {"_target_": "optuna.samplers.GridSampler"},
    "tpe, Optuna defaults": {"_target_": "optuna.samplers.TPESampler"},
    "tpe multivariate, 10 startup": {"_target_": "optuna.samplers.TPESampler", "multivariate": True},
    "tpe independent, 5 startup": {"_target_": "optuna.samplers.TPESampler", "n_startup_trials": 5},
    "tpe multivariate, 3 startup": {"_target_": "optuna.samplers.TPESampler", "multivariate": True,
                                    "n_startup_trials": 3},
    "tpe multivariate, 5 startup (our tpe)": {
        "_target_": "optuna.samplers.TPESampler", "multivariate": True, "n_startup_trials": 5},
    "gp, Optuna defaults (10 startup; our default before)": {"_target_": "optuna.samplers.GPSampler"},
    "gp, 3 startup": {"_target_": "optuna.samplers.GPSampler", "n_startup_trials": 3},
    "nsgaii": {"_target_": "optuna.samplers.NSGAIISampler"},
    "nsgaii, population 10": {"_target_": "optuna.samplers.NSGAIISampler", "population_size": 10},
    "qmc": {"_target_": "optuna.samplers.QMCSampler"},
}
# Also replayed with `hydra.sweeper.constraints=["val_accuracy >= <floor>"]`, as a user who knows the floor sweeps.
CONSTRAINED = {"default + floor as constraint": "default"}
QUICK_STRATEGIES = ["default", "random", "hydra grid order"]


@dataclass
class Table:
    space: dict[str, str]
    results: dict[tuple, dict]  # configuration key -> the result dict a trial returns
    order: list[dict]  # configurations in Hydra's BasicSweeper order
    meta: dict = field(default_factory=dict)


def key_of(params: dict, keys: list[str]) -> tuple:
    return tuple(str(params[k]) for k in keys)


def load_table(csv_path: Path) -> Table:
    """One result per configuration: of its measurements, the fastest (other
    jobs on the machine only ever slow a run down)."""
    from measure_grid import METRICS, grid

    meta = json.loads(csv_path.with_suffix(".json").read_text())
    space = meta["space"]
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    results: dict[tuple, dict] = {}
    for r in rows:
        result = {"outcome": r["outcome"], "reason": r["reason"],
                  "metrics": {k: float(r[k]) for k in METRICS if r.get(k)}}
        key = key_of(r, list(space))
        if key not in results or _speed(result) > _speed(results[key]):
            results[key] = result
    order = [c for c in grid(space) if key_of(c, list(space)) in results]
    return Table(space, results, order, meta)


def _speed(result: dict) -> float:
    return result["metrics"].get("throughput_samples_per_s", -1.0) if result["outcome"] == "ok" else -1.0


def target_of(table: Table, floor: float) -> float:
    """The throughput a strategy must reach: 95% of the best among configurations meeting the floor."""
    good = [r["metrics"]["throughput_samples_per_s"] for r in table.results.values()
            if r["outcome"] == "ok" and r["metrics"].get("val_accuracy", 0) >= floor]
    if not good:
        raise SystemExit(f"search_efficiency: --accuracy-floor must leave at least one configuration; got {floor}, "
                         f"best val_accuracy in the table is {best_accuracy(table):.3f}; fix: lower the floor")
    return TARGET_FRACTION * max(good)


def best_accuracy(table: Table) -> float:
    return max(r["metrics"].get("val_accuracy", 0) for r in table.results.values() if r["outcome"] == "ok")


def hypervolume(points: list[tuple[float, float]], scale: float) -> float:
    """Area dominated by (throughput/scale, accuracy) points, both maximised, from (0, 0)."""
    area, best_acc = 0.0, 0.0
    for thr, acc in sorted(points, reverse=True):  # highest throughput first
        if acc > best_acc:
            area += thr / scale * (acc - best_acc)
            best_acc = acc
    return area


def sampler_node(name: str) -> dict:
    node = STRATEGIES[CONSTRAINED.get(name, name)]
    if node is not None:
        return dict(node)
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from hydra_plugins.search_sweeper.search_sweeper import SearchSweeperConf  # also registers the sampler nodes

    default = next(d["sampler"] for d in SearchSweeperConf().defaults if isinstance(d, dict))
    stored = ConfigStore.instance().load(f"hydra/sweeper/sampler/{default}.yaml").node
    return OmegaConf.to_container(stored, resolve=True)


def replay(table: Table, name: str, seed: int, floor: float, target: float, min_trials: int,
           max_trials: int | None = None) -> dict:
    """One strategy, one seed: trials until the target, and the front's hypervolume at HV_AT."""
    points, reached, n = [], None, 0
    keys = list(table.space)
    scale = max(r["metrics"].get("throughput_samples_per_s", 0) for r in table.results.values())
    hv = {}

    def record(result: dict) -> None:
        nonlocal reached, n
        n += 1
        m = result["metrics"]
        if result["outcome"] == "ok":
            points.append((m["throughput_samples_per_s"], m["val_accuracy"]))
            if reached is None and m["val_accuracy"] >= floor and m["throughput_samples_per_s"] >= target:
                reached = n
        if n in HV_AT:
            hv[n] = hypervolume(points, scale)

    limit = min(len(table.results), max_trials or len(table.results))  # a target not reached counts as limit
    if STRATEGIES.get(name) and STRATEGIES[name]["_target_"] == "hydra-basic-sweeper-order":
        for config in table.order:
            record(table.results[key_of(config, keys)])
            if n >= limit or (reached and n >= min_trials):
                break
        return {"trials_to_target": reached or limit, "hv": hv}

    import optuna

    from search.sweep.no_repeat import ask_unseen
    from search.sweep.outcome import score, tell
    from search.sweep.space import build_space
    from search.sweep.constraints import parse_constraints
    from search.sweep.study import make_sampler

    dists = build_space(table.space, []).distributions
    study = optuna.create_study(directions=DIRECTIONS, sampler=make_sampler(sampler_node(name), seed, dists))
    rng = random.Random(seed)
    constraints = parse_constraints([f"val_accuracy >= {floor}"] if name in CONSTRAINED else [])
    while n < limit and not (reached and n >= min_trials):
        trial = ask_unseen(study, dists, rng)
        result = table.results[key_of(trial.params, keys)]
        tell(study, trial, score(result, OPTIMISED_METRICS, 2, constraints), DIRECTIONS)
        record(result)
    return {"trials_to_target": reached or limit, "hv": hv}


def summarise(runs: list[dict], grid_hv: float) -> dict:
    trials = [r["trials_to_target"] for r in runs]
    return {"median": statistics.median(trials), "mean": statistics.fmean(trials),
            "p90": sorted(trials)[int(0.9 * (len(trials) - 1))], "max": max(trials),
            **{f"hv{k}": statistics.fmean(r["hv"][k] for r in runs) / grid_hv for k in HV_AT if
               all(k in r["hv"] for r in runs)}}


def render(command: str, table: Table, floor: float, target: float, seeds: int, rows: dict[str, dict],
           default_node: dict, load: str, wall_s: float, note: str) -> str:
    meta = table.meta
    ok = sum(r["outcome"] == "ok" for r in table.results.values())
    meeting = sum(r["outcome"] == "ok" and r["metrics"].get("val_accuracy", 0) >= floor
                  for r in table.results.values())
    hits = sum(r["outcome"] == "ok" and r["metrics"].get("val_accuracy", 0) >= floor
               and r["metrics"]["throughput_samples_per_s"] >= target for r in table.results.values())
    ratio = rows["default"]["mean"] / rows["random"]["mean"]
    verdict = "meets" if ratio <= GOAL_RATIO else "MISSES"
    lines = [
        SECTION, "",
        f"Command: `{command}` (replay: {wall_s:.0f} s, load average {load})  ",
        f"Table: `scripts/bench/data/digits_grid.csv` (+ `.json`: command, machine, date, load), measured by "
        f"`{meta['command']}` on {meta['date'][:10]} ({meta['wall_s'] / 60:.0f} min) with "
        f"`{' '.join(meta['overrides'])}`: {len(table.results)} configurations ({ok} ran, the rest are infeasible on "
        f"2 cores: 2 DDP ranks x 2 threads), " + ", ".join(f"`{k}={v}`" for k, v in table.space.items()) + "  ",
        f"Machine: {meta['machine']}  ",
        f"Default sampler: `{json.dumps(default_node)}`", "",
        f"**Default: {rows['default']['mean']:.1f} trials on average to reach the target, random search "
        f"{rows['random']['mean']:.1f}: ratio {ratio:.2f}** ({verdict} the goal of at most 1/3). Target: "
        f"{TARGET_FRACTION:.0%} of the best throughput among configurations with val_accuracy >= {floor} "
        f"(= {target:.0f} samples/s; {meeting} configurations meet the floor, {hits} of them the target). "
        f"{seeds} seeds per strategy; hypervolume of the (throughput / grid max, val_accuracy) front from (0, 0), "
        f"as a fraction of the whole grid's.", "",
        "| strategy | trials to target: mean | median | p90 | max | HV@10 | HV@20 | HV@40 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *[f"| {name} | {s['mean']:.1f} | {s['median']:.0f} | {s['p90']} | {s['max']} | "
          + " | ".join(f"{s[f'hv{k}']:.3f}" if f"hv{k}" in s else "-" for k in HV_AT) + " |"
          for name, s in rows.items()],
        "",
        "Every strategy runs through the sweeper's own repeat skipping (a proposal that repeats a configuration "
        "is replaced by an unseen one drawn at random, and costs no trial); an infeasible configuration counts as a "
        "trial, as in a sweep. Hydra's grid order is one fixed sequence, so its figure is where the first "
        "configuration on target happens to sit in the product order, the same for every seed. QMC is unscrambled "
        "by default, so its seeds agree too. NSGA-II draws its first generation (50 by default) at random.", "",
    ]
    if note:
        lines += [note, ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", type=Path, default=DATA / "digits_grid.csv")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--accuracy-floor", type=float, default=0.9)
    parser.add_argument("--strategies", nargs="*", default=[*STRATEGIES, *CONSTRAINED],
                        choices=[*STRATEGIES, *CONSTRAINED])
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, 3 strategies, at most 15 trials; checks the replay works")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    parser.add_argument("--note", default="", help="a paragraph for the doc: what the figures mean")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        print(f"search_efficiency: --seeds must be >= 2; got {args.seeds}; fix: --seeds 30", file=sys.stderr)
        return 2
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    import warnings

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    started = time.perf_counter()
    table = load_table(args.table)
    target = target_of(table, args.accuracy_floor)
    strategies = QUICK_STRATEGIES if args.quick else ["default", "random"] + [
        s for s in args.strategies if s not in ("default", "random")]
    seeds = 2 if args.quick else args.seeds
    grid_hv = hypervolume([(r["metrics"]["throughput_samples_per_s"], r["metrics"]["val_accuracy"])
                           for r in table.results.values() if r["outcome"] == "ok"],
                          max(r["metrics"].get("throughput_samples_per_s", 0) for r in table.results.values()))
    rows = {}
    for name in strategies:
        t0 = time.perf_counter()
        trials = (10, 15) if args.quick else (max(HV_AT), None)  # at least, at most
        runs = [replay(table, name, seed, args.accuracy_floor, target, *trials) for seed in range(seeds)]
        rows[name] = summarise(runs, grid_hv)
        s = rows[name]
        print(f"{name:30s} trials to target mean {s['mean']:6.1f} median {s['median']:5.0f} max {s['max']:4d}  "
              + "  ".join(f"HV@{k} {s.get(f'hv{k}', float('nan')):.3f}" for k in HV_AT)
              + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    ratio = rows["default"]["mean"] / rows["random"]["mean"]
    print(f"default / random trials to target: {ratio:.2f} (goal <= {GOAL_RATIO:.2f})")
    if not args.quick and not args.no_write:
        shown = [a for i, a in enumerate(argv) if a != "--note" and (i == 0 or argv[i - 1] != "--note")]
        command = "python scripts/bench/search_efficiency.py" + "".join(f" {shlex.quote(a)}" for a in shown)
        load = load_averages()
        write_section(SECTION, render(command, table, args.accuracy_floor, target, seeds, rows,
                                      sampler_node("default"), load, time.perf_counter() - started, args.note))
        update_summary("Search efficiency", f"{ratio:.2f} ({rows['default']['mean']:.1f} vs "
                       f"{rows['random']['mean']:.1f} trials, {seeds} seeds, replayed on a measured grid)",
                       ratio <= GOAL_RATIO)
        print("updated docs/BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

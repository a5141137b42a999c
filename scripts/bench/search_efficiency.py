"""Search efficiency: how many trials (and seconds) each search strategy needs to
find the answer, on grids measured once on this machine (measure_grid.py),
replayed offline.

The answer is the one the sweep gives (DESIGN.md, "The answer"): the fastest
configuration at the baseline's accuracy. The baseline is the grid cell of the
user's config (conf/config.yaml's defaults); the floor is its val_accuracy
minus the sweep's tolerance (0.005); the target is 95% of the best throughput
among the cells that meet the floor. Like the sweep, a replay runs the
baseline first (trial 0, enqueued, never stopped early) and counts it.

Every strategy runs through the sweeper's own pieces: the sampler built by
search.sweep.study.make_sampler from the node `hydra/sweeper/sampler` selects,
shown the study by search.sweep.gp_view (numeric choices in order; after the
baseline, with `search_for=answer`, throughput under the accuracy floor),
wrapped by search.sweep.rule_sampler.within_rules (forbidden combinations and
repeats are repaired before a trial number is spent; the rule here: a cell the
table says is infeasible), search.sweep.no_repeat.ask_unseen, the two-metric
early-stopping rule (search.sweep.early_stopping.probe_bar with the sweep's
default margin and startup trials, the answer's bar once the baseline ran under
`search_for=answer`: a cell whose throughput is below the bar and that has a
probe, objectives.in_trial_stopping.probe_end_step, stops after its probe),
staging (a cell whose maths an earlier trial of the replay trained in full
is timed only, never stopped, and scored with that trial's accuracy:
search/sweep/staging.py), the search's patience (search.sweep.patience:
the replay ends once the sampler's proposals stop making the answer faster,
after the start design, as the sweep applies it; random search runs without
it), and search.sweep.outcome.score/tell. A trial's result is looked up in
the table instead of trained, so 30 seeds take minutes, not days.

The tables were measured once per cell on a shared machine, and their noise
is larger than the effects sought: in digits_grid, the cells of one maths
near the floor (they differ only in speed-only knobs, so in their loader's
random stream and the order floats are summed; one cell measured twice gives
the same accuracy) span up to 3.6 points of val_accuracy against a tolerance
of 0.5; in digits_lr_grid, the seven cells of one amount of work (they
differ only in the learning rate) span up to 9.2x in throughput. Read cell by cell, the answer
is whichever cell a lucky measurement put above the floor, which no search
can learn. So by default a table is read by what each knob can change
(`denoised`): a cell's accuracy is the median of its maths's cells, its
throughput the fastest of its work's cells, or, where the grid's works were
timed on their own (`<grid>.works.csv`, measure_grid.py --works: every work
in each of several shuffled passes, so a neighbour's load falls on all
alike), the fastest of its work's passes there, its training time scaled to
match; where the grid's models were trained at other training seeds too
(`<grid>.seeds.csv`, measure_grid.py --seeds), a cell's accuracy is the mean
over the seeds (`--training-seeds` picks which; `--training-seeds 0` reads
the table's own alone): at the grids' budget one model's val_accuracy moves
by a few points from seed to seed (up to 14.5), and the sweep itself judges
its answer's accuracy by the mean of two seeds.
`--as-measured` replays the cells as they are.

Per strategy and seed: the trials (and trial numbers, which also count the
repeats the sweep skipped as failed trials) until a trial that finished ok
reaches the target at the floor; the seconds those trials would have taken
(each cell's measured trial_wall_s; a stopped trial its start-up, plus its
training time up to the end of its probe, a timed-only one up to the end of its
windows); the seconds of its first 20 trials, what a default sweep's search costs
with the strategy (SWEEP_TRIALS; each run goes on to 20 trials at least, unless
its patience ends it first: then the seconds until then); the
hypervolume of the (throughput, accuracy) front after 10 trials, as a fraction
of the whole grid's.

    python scripts/bench/search_efficiency.py            # the three stored grids, 30 seeds -> docs/BENCHMARKS.md
    python scripts/bench/search_efficiency.py --quick    # 2 seeds, 3 strategies, at most 8 trials
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import json
import random
import re
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
TABLES = [DATA / "digits_grid.csv", DATA / "digits_lr_grid.csv", DATA / "digits_long_grid.csv",
          DATA / "gpt_grid.csv"]
SECTION = "## Search efficiency"
OPTIMISED_METRICS = ["throughput_samples_per_s", "val_accuracy"]
DIRECTIONS = ["maximize", "maximize"]
HV_AT = 10
# A default sweep's trials (conf/search/default.yaml n_trials): the replay also sums the seconds of its first this
# many trials, what a default sweep's search costs with the strategy (the target reached or not).
SWEEP_TRIALS = 20
TARGET_FRACTION = 0.95
ACCURACY_TOLERANCE = 0.005  # hydra.sweeper.accuracy_tolerance's default
GOAL_MEDIAN = 12  # the default's median trials to the target, at most
GOAL_RATIO = 1 / 4  # ... and at most this fraction of random search's
# A model-based strategy that has not reached the target by then counts as this many trials (its mean is then a
# lower bound); random search and Hydra's order run until they reach it (GP's fit costs seconds a trial).
MAX_TRIALS = 40


@dataclass(frozen=True)
class Strategy:
    sampler: dict | None = None  # a `hydra/sweeper/sampler` node; None: the sweeper's default
    stopped: str | None = None  # how a stopped trial is told (early_stopping.STOPPED_TELLINGS); None: the sweep's
    avoid_repeats: bool = True  # False: a repeat reaches ask_unseen, which spends a trial number on it (before)
    early_stopping: bool = True
    floor_as_constraint: bool = False  # hydra.sweeper.constraints=["val_accuracy >= <floor>"]
    hydra_order: bool = False  # Hydra's BasicSweeper: the product, last knob fastest
    search_for: str = "answer"  # hydra.sweeper.search_for: "front" shows the sampler both metrics throughout
    gp_view: bool = True  # False: the GP sees the study as it is (choices unordered, both metrics): before
    stopped_unknown: bool = True  # False: the GP's view shows a stopped trial as told (infeasible, worst accuracy)
    same_maths: bool = True  # False: a stopped trial's accuracy shown at the floor even where its maths trained (before)
    stop_start_moves: bool = True  # False: the start design's moves run to the end (never stopped early)
    start_design: str = "one_knob_at_a_time"  # hydra.sweeper.start_design; "sampler": its own start-up trials;
    # "any sampler": the start design whatever the sampler (the sweep runs it for the GP only)
    combine: bool = True  # hydra.sweeper.start_combination: the start moves that paid, combined one at a time
    halfway: bool = True  # ... and a move faster but below the floor first taken halfway back
    move_work_neutral: bool = False  # True: the start design moves the learning rate alone too (before)
    speed_only_first: bool = True  # False: the start design's moves in the space's order (before)
    halfway_from_stopped: bool = True  # False: halfway back only from a move whose accuracy was measured (before)
    staging: bool = True  # False: a trial whose maths trained already trains again (hydra.sweeper.staging=false)
    short_probe: bool = True  # False: no probe unless all of train.probe_steps' windows end by half the steps (before)
    settled: bool = True  # False: a configuration whose maths trained below the floor is still proposed (before)
    cheap_repairs: bool = True  # False: a repaired proposal's nearest unseen configuration drawn at random (before)
    per_second: bool = True  # False: the GP's own pick, blind to what a configuration costs (before)
    patience: int | None = 3  # hydra.sweeper.patience_trials; None: every trial (before)


GP = "optuna.samplers.GPSampler"
STRATEGIES: dict[str, Strategy] = {
    "default": Strategy(),
    "random": Strategy({"_target_": "optuna.samplers.RandomSampler"}, patience=None),  # random search as it is
    "hydra grid order": Strategy(hydra_order=True),
    "before: stopped = PRUNED, repeats skipped as failed trials": Strategy(stopped="pruned", avoid_repeats=False),
    "stopped = PRUNED, repeats repaired in the sampler": Strategy(stopped="pruned"),
    "stopped = probe throughput + worst accuracy, feasible": Strategy(stopped="worst"),
    "stopped = probe throughput + worst accuracy, infeasible": Strategy(stopped="infeasible"),
    "start moves not combined (before)": Strategy(combine=False),
    "start moves combined, none halfway back": Strategy(halfway=False),
    "start moves the learning rate alone too (before)": Strategy(move_work_neutral=True),
    "start moves in the space's order": Strategy(speed_only_first=False),
    "halfway back from measured moves only": Strategy(halfway_from_stopped=False),
    "no probe in a trial too short for all its windows (before)": Strategy(short_probe=False),
    "before: space's order, halfway back from measured moves only, no short probe": Strategy(
        speed_only_first=False, halfway_from_stopped=False, short_probe=False),
    "default, no early stopping": Strategy(early_stopping=False),
    "maths below the floor still proposed (before)": Strategy(settled=False),
    "repairs at random among the nearest (before)": Strategy(cheap_repairs=False),
    "GP's pick blind to cost (before)": Strategy(per_second=False),
    "every trial, no patience (before)": Strategy(patience=None),
    "default, no staging": Strategy(staging=False),
    "no early stopping, no staging (every trial trained in full)": Strategy(early_stopping=False, staging=False),
    "start moves never stopped early": Strategy(stop_start_moves=False),
    "start design = sampler (the GP's random start-up)": Strategy(start_design="sampler"),
    "search_for=front (choices in order, two metrics throughout)": Strategy(search_for="front"),
    "before: GP sees choices unordered, two metrics": Strategy(gp_view=False),
    "GP shown a stopped trial as told (infeasible, worst accuracy)": Strategy(stopped_unknown=False),
    "stopped trial at the floor though its maths trained (before)": Strategy(same_maths=False),
    "default + floor as constraint": Strategy(floor_as_constraint=True),
    "gp, 3 startup": Strategy({"_target_": GP, "n_startup_trials": 3}),
    "gp, 10 startup (Optuna's default)": Strategy({"_target_": GP, "n_startup_trials": 10}),
    "gp, deterministic objective": Strategy({"_target_": GP, "n_startup_trials": 5,
                                             "deterministic_objective": True}),
    "tpe multivariate, 5 startup (our tpe)": Strategy({"_target_": "optuna.samplers.TPESampler",
                                                       "multivariate": True, "n_startup_trials": 5}),
    "tpe multivariate, after the start design (the GP's; not the default for TPE)": Strategy(
        {"_target_": "optuna.samplers.TPESampler", "multivariate": True, "n_startup_trials": 5},
        start_design="any sampler"),
}
QUICK_STRATEGIES = ["default", "random", "hydra grid order"]


@dataclass
class Table:
    name: str
    space: dict[str, str]
    results: dict[tuple, dict]  # configuration key -> the result dict a trial returns (+ its times)
    order: list[dict]  # configurations in Hydra's BasicSweeper order
    meta: dict = field(default_factory=dict)
    work_speed: dict[tuple, float] | None = None  # from <grid>.works.csv: each work's fastest pass, samples/s
    seed_accuracy: dict[tuple, dict[int, float]] | None = None  # from <grid>.seeds.csv: each model's val_accuracy
    # at the other training seeds, by seed


def key_of(params: dict, keys: list[str]) -> tuple:
    return tuple(str(params[k]) for k in keys)


def load_table(csv_path: Path) -> Table:
    """One result per configuration: of its measurements, the fastest (other
    jobs on the machine only ever slow a run down). A grid measured by parts
    (measure_grid.BY_PARTS) has no table of cells: composed from its parts."""
    from measure_grid import BY_PARTS, METRICS, grid

    if csv_path.stem in BY_PARTS:
        return composed_table(csv_path)
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
    works = csv_path.with_name(csv_path.stem + ".works.csv")
    if works.exists():
        meta = {**meta, "works": json.loads(works.with_suffix(".json").read_text())}
    seeds = csv_path.with_name(csv_path.stem + ".seeds.csv")
    if seeds.exists():
        meta = {**meta, "seeds": json.loads(seeds.with_suffix(".json").read_text())}
    return Table(csv_path.stem, space, results, order, meta, load_works(works) if works.exists() else None,
                 load_seeds(seeds) if seeds.exists() else None)


def composed_table(csv_path: Path) -> Table:
    """A grid measured by parts as a table of cells: each cell's outcome and throughput its work's (the fastest
    pass that ran ok; a work no pass ran ok: its last pass's outcome), its accuracy its model's at training seed 0
    (the other seeds go to seed_accuracy, as for a grid with a cell table), its training time the model's scaled
    from the model's own throughput (measured at the speed-only knobs' conf/ values) to the work's, its trial time
    the model's less its training time plus that."""
    from measure_grid import grid

    works_path = csv_path.with_name(csv_path.stem + ".works.csv")
    seeds_path = csv_path.with_name(csv_path.stem + ".seeds.csv")
    missing = [p.name for p in (seeds_path, works_path) if not p.exists()]
    if missing:
        raise SystemExit(f"search_efficiency: {csv_path.stem} is measured by parts and needs both; got "
                         f"{', '.join(missing)} missing; fix: python scripts/bench/measure_grid.py --grid "
                         f"{csv_path.stem} --seeds 0 1 2, then the same with --works --passes 3")
    works_meta = json.loads(works_path.with_suffix(".json").read_text())
    seeds_meta = json.loads(seeds_path.with_suffix(".json").read_text())
    # the grid's space: its models' knobs, then its works' others (measure_grid.py keeps the grid's order in both)
    space = {**seeds_meta["space"], **works_meta["space"]}
    overrides = seeds_meta["overrides"]
    model_keys, work_keys = list(seeds_meta["space"]), list(works_meta["space"])
    speed = load_works(works_path)
    last_pass: dict[tuple, dict] = {}
    with works_path.open() as f:
        for r in csv.DictReader(f):
            last_pass[key_of(r, work_keys)] = r
    models: dict[tuple, dict] = {}
    with seeds_path.open() as f:
        for r in csv.DictReader(f):
            if r["outcome"] == "ok" and r["seed"] == "0":
                models[key_of(r, model_keys)] = r
    own_work = {k: _select(grid_config(overrides), k) for k in work_keys if k not in model_keys}
    results: dict[tuple, dict] = {}
    for cell in grid(space):
        work, model = key_of(cell, work_keys), key_of(cell, model_keys)
        if model not in models:
            continue  # a model that never trained at seed 0: not a cell of the grid
        if work not in speed:
            r = last_pass.get(work, {"outcome": "failed", "reason": "not timed"})
            results[key_of(cell, list(space))] = {"outcome": r["outcome"], "reason": r["reason"], "metrics": {}}
            continue
        m = models[model]
        model_work = key_of({**cell, **own_work}, work_keys)
        model_speed = speed.get(model_work, float(m["throughput_samples_per_s"]))
        train_s = float(m["train_wall_s"]) * model_speed / speed[work]
        results[key_of(cell, list(space))] = {"outcome": "ok", "reason": "", "metrics": {
            "throughput_samples_per_s": speed[work], "val_accuracy": float(m["val_accuracy"]),
            "val_loss": float(m["val_loss"]), "train_wall_s": train_s, "eval_wall_s": float(m["eval_wall_s"]),
            "trial_wall_s": float(m["trial_wall_s"]) - float(m["train_wall_s"]) + train_s}}
    order = [c for c in grid(space) if key_of(c, list(space)) in results]
    # no command, date or time of its own: each part's are in its meta (render_table reads them there)
    meta = {"space": space, "overrides": overrides, "machine": seeds_meta["machine"], "by_parts": True,
            "works": works_meta, "seeds": seeds_meta}
    others = {k: {s: a for s, a in by_seed.items() if s != 0} for k, by_seed in load_seeds(seeds_path).items()}
    return Table(csv_path.stem, space, results, order, meta, speed, others)


def load_works(path: Path) -> dict[tuple, float]:
    """Each work's throughput from measure_grid.py --works: the fastest of its passes that ran ok."""
    meta = json.loads(path.with_suffix(".json").read_text())
    speed: dict[tuple, float] = {}
    with path.open() as f:
        for r in csv.DictReader(f):
            if r["outcome"] == "ok":
                key = key_of(r, list(meta["space"]))
                speed[key] = max(speed.get(key, 0.0), float(r["throughput_samples_per_s"]))
    return speed


def load_seeds(path: Path) -> dict[tuple, dict[int, float]]:
    """Each model's val_accuracy at the other training seeds, from measure_grid.py --seeds (runs that ran ok)."""
    meta = json.loads(path.with_suffix(".json").read_text())
    accuracy: dict[tuple, dict[int, float]] = {}
    with path.open() as f:
        for r in csv.DictReader(f):
            if r["outcome"] == "ok":
                accuracy.setdefault(key_of(r, list(meta["space"])), {})[int(r["seed"])] = float(r["val_accuracy"])
    return accuracy


def at_training_seeds(table: Table, seeds: list[int] | None) -> Table:
    """The table with its models' accuracy at these training seeds only (0: the table's own, always read);
    None: every seed measured."""
    if seeds is None or table.seed_accuracy is None:
        return table
    kept = {maths: {s: a for s, a in by_seed.items() if s in seeds} for maths, by_seed in table.seed_accuracy.items()}
    return dataclasses.replace(table, seed_accuracy=kept if any(kept.values()) else None)


def read_grid(path: Path, denoise: bool, seeds: list[int] | None) -> Table:
    """A stored grid as a replay reads it: its accuracy at these training seeds (None: every one measured),
    denoised or as measured."""
    table = at_training_seeds(load_table(path), seeds)
    return denoised(table) if denoise else table


def averaged_seeds(table: Table) -> int | None:
    """How many training seeds a denoised table's accuracy is the mean of; None where it reads one."""
    return len(training_seeds(table)) if table.meta.get("denoised") and table.seed_accuracy is not None else None


def training_seeds(table: Table) -> list[int]:
    """The training seeds a denoised cell's accuracy is the mean of."""
    return sorted({0, *(s for by_seed in (table.seed_accuracy or {}).values() for s in by_seed)})


def denoised(table: Table) -> Table:
    """The table read by what each knob can change. Accuracy: the median over the cells of the same maths
    (cells that differ only in speed-only knobs, search/sweep/staging.py: another loader worker count is
    another random stream, so these are repeated measurements of one model; near the floor digits_grid's
    cells of one maths span up to 3.6 points of val_accuracy, seven times the tolerance). Throughput: the
    fastest of the cells that do the same work (cells that differ only in the learning rate:
    digits_lr_grid's seven span up to 9.2x, measured at loads of 2 to 10), by load_table's rule that other
    jobs only ever slow a run down; where the works were timed on their own (table.work_speed), that
    time instead, and the cell's training time scaled to it. Where the models were trained again at other
    training seeds (table.seed_accuracy), a cell's accuracy is the mean of that median (the table's own
    seed) and those seeds' accuracies. What an ok cell reports is otherwise as measured."""
    from search.sweep.start_design import WORK_NEUTRAL

    from search.sweep.staging import SPEED_ONLY

    keys = list(table.space)
    ok = {k: r for k, r in table.results.items() if r["outcome"] == "ok"}
    accuracy: dict[tuple, list[float]] = {}
    speed: dict[tuple, float] = {}
    for key, result in ok.items():
        m = result["metrics"]
        maths = tuple(v for k, v in zip(keys, key) if k not in SPEED_ONLY)
        work = tuple(v for k, v in zip(keys, key) if k not in WORK_NEUTRAL)
        accuracy.setdefault(maths, []).append(m["val_accuracy"])
        speed[work] = max(speed.get(work, 0.0), m["throughput_samples_per_s"])
    results = dict(table.results)
    for key, result in ok.items():
        maths = tuple(v for k, v in zip(keys, key) if k not in SPEED_ONLY)
        work = tuple(v for k, v in zip(keys, key) if k not in WORK_NEUTRAL)
        at_seeds = [statistics.median(accuracy[maths]), *(table.seed_accuracy or {}).get(maths, {}).values()]
        metrics = {**result["metrics"], "val_accuracy": statistics.fmean(at_seeds),
                   "throughput_samples_per_s": speed[work]}
        if table.work_speed is not None:  # timed on its own: this cell's training at its work's speed
            measured = result["metrics"]["throughput_samples_per_s"]
            timed = table.work_speed.get(work, speed[work])  # a work no pass timed ok: its cells' fastest
            train_s = metrics.get("train_wall_s", 0.0) * measured / timed
            metrics.update(throughput_samples_per_s=timed, train_wall_s=train_s, trial_wall_s=metrics.get(
                "trial_wall_s", 0.0) - result["metrics"].get("train_wall_s", 0.0) + train_s)
        results[key] = {**result, "metrics": metrics}
    return Table(table.name, table.space, results, table.order, {**table.meta, "denoised": True},
                 table.work_speed, table.seed_accuracy)


def label(table: Table) -> str:
    return table.name if table.meta.get("denoised") else f"{table.name}, as measured"


def _speed(result: dict) -> float:
    return result["metrics"].get("throughput_samples_per_s", -1.0) if result["outcome"] == "ok" else -1.0


@functools.lru_cache(maxsize=None)
def _composed(overrides: tuple[str, ...]) -> dict:
    from repeatability import compose

    return compose(list(overrides))


def grid_config(overrides: list[str]) -> dict:
    """conf/ composed with a grid's overrides, as its trials ran (objective=gpt sets its own learning rate)."""
    return _composed(tuple(overrides))


def _select(cfg: dict, dotted: str) -> object:
    for part in dotted.split("."):
        cfg = cfg[part]
    return cfg


def _train_settings(table: Table) -> dict:
    """The measured trials' budget, warm-up, window and probe steps: conf/'s, with the grid's overrides."""
    return dict(grid_config(table.meta.get("overrides", []))["train"])


def baseline_of(table: Table) -> dict:
    """The user's config (conf/'s defaults, with the grid's overrides: its objective's own) as a configuration of
    the grid."""
    params = {k: _select(grid_config(table.meta.get("overrides", [])), k) for k in table.space}
    if key_of(params, list(table.space)) not in table.results:
        raise SystemExit(f"search_efficiency: the grid must hold the baseline (conf/'s defaults); "
                         f"got {params} missing from {table.name}; fix: add those values to the grid's space")
    return params


def floor_of(table: Table, baseline: dict, floor: float | None) -> float:
    if floor is not None:
        return floor
    result = table.results[key_of(baseline, list(table.space))]
    return result["metrics"]["val_accuracy"] - ACCURACY_TOLERANCE


def target_of(table: Table, floor: float, fraction: float = TARGET_FRACTION) -> float:
    """The throughput a strategy must reach: 95% (`fraction`) of the best among configurations meeting the floor."""
    good = [r["metrics"]["throughput_samples_per_s"] for r in table.results.values()
            if r["outcome"] == "ok" and r["metrics"].get("val_accuracy", 0) >= floor]
    if not good:
        raise SystemExit(f"search_efficiency: --accuracy-floor must leave at least one configuration; got {floor}, "
                         f"best val_accuracy in the table is {best_accuracy(table):.3f}; fix: lower the floor")
    return fraction * max(good)


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


def default_sampler_node() -> dict:
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from hydra_plugins.search_sweeper.search_sweeper import SearchSweeperConf  # also registers the sampler nodes

    default = next(d["sampler"] for d in SearchSweeperConf().defaults if isinstance(d, dict))
    stored = ConfigStore.instance().load(f"hydra/sweeper/sampler/{default}.yaml").node
    return OmegaConf.to_container(stored, resolve=True)


def sweep_defaults() -> tuple[float, int]:
    from hydra_plugins.search_sweeper.search_sweeper import SearchSweeperConf

    conf = SearchSweeperConf()
    return conf.early_stopping_margin, conf.early_stopping_startup_trials


def _steps(config: dict, train: dict) -> int:
    """A trial's optimizer steps at the budget (its global batch: per-device batch times devices)."""
    return train["budget_samples"] // (int(config["batch_size"]) * int(config.get("parallel.devices", 1)))


def _cost_up_to(m: dict, steps_run: int, steps: int) -> float:
    """A measured cell's wall time had it trained `steps_run` of its `steps` and not been evaluated: its start-up
    (trial_wall_s less its training and evaluation) plus that share of its training time."""
    train_s = m.get("train_wall_s", 0.0)
    return m.get("trial_wall_s", 0.0) - train_s - m.get("eval_wall_s", 0.0) + train_s * min(1.0, steps_run / steps)


def stopped_result(table: Table, config: dict, result: dict, bar: float | None, train: dict,
                   short_probe: bool = True) -> tuple[dict, float]:
    """What the trial returns and how long it takes, early stopping applied as the trial applies it
    (objectives/in_trial_stopping.py probe_end_step, on the trial's own window plan); not `short_probe`: no probe
    when all the windows of train.probe_steps do not end within the first half of the steps (before)."""
    import math

    from objectives.in_trial_stopping import probe_end_step
    from objectives.timing import plan_windows

    m = result["metrics"]
    wall = m.get("trial_wall_s", 0.0)
    if result["outcome"] != "ok" or bar is None:
        return result, wall
    steps = _steps(config, train)
    plan = plan_windows(steps, train["warmup_steps"], train["window_steps"])
    probe_end = probe_end_step(train["probe_steps"], plan, steps)
    if not short_probe:
        probe_end = plan.warmup_steps + max(1, math.ceil(train["probe_steps"] / plan.window_steps)) * plan.window_steps
        probe_end = probe_end if probe_end <= steps // 2 else 0
    thr = m["throughput_samples_per_s"]
    if not probe_end or thr >= bar:
        return result, wall
    return {"outcome": "stopped_early", "reason": f"probe {thr:.4g} below {bar:.4g}",
            "metrics": {"throughput_samples_per_s": thr, "probe_throughput_samples_per_s": thr}}, \
        _cost_up_to(m, probe_end, steps)


def staged_result(config: dict, result: dict, source: dict, train: dict) -> tuple[dict, float]:
    """A trial whose maths trained in full earlier in the replay, as staging runs it (search/sweep/staging.py):
    timed only (objectives/timing.py throughput_only_steps), never stopped early, scored with the accuracy of
    the run that trained its maths (`source`)."""
    from types import SimpleNamespace

    from objectives.timing import throughput_only_steps

    steps = _steps(config, train)
    metrics = {**result["metrics"], **{k: source["metrics"][k] for k in ("val_accuracy", "val_loss")
                                       if k in source["metrics"]}}
    return {**result, "metrics": metrics}, _cost_up_to(result["metrics"], throughput_only_steps(
        SimpleNamespace(**train), steps), steps)


def replay(table: Table, name: str, seed: int, floor: float, target: float, min_trials: int,
           max_trials: int) -> dict:
    """One strategy, one seed: trials, trial numbers and seconds until the target, and HV@10."""
    strategy = STRATEGIES[name]
    keys = list(table.space)
    scale = max(r["metrics"].get("throughput_samples_per_s", 0) for r in table.results.values())
    state = {"points": [], "reached": None, "n": 0, "seconds": 0.0, "reached_s": None, "hv": None, "sweep_s": None}

    def record(result: dict, cost: float) -> None:
        state["n"] += 1
        state["seconds"] += cost
        m = result["metrics"]
        if result["outcome"] == "ok":
            state["points"].append((m["throughput_samples_per_s"], m["val_accuracy"]))
            if state["reached"] is None and m["val_accuracy"] >= floor and m["throughput_samples_per_s"] >= target:
                state["reached"], state["reached_s"] = state["n"], state["seconds"]
        if state["n"] == HV_AT:
            state["hv"] = hypervolume(state["points"], scale)
        if state["n"] == SWEEP_TRIALS:
            state["sweep_s"] = state["seconds"]

    def done() -> bool:
        return state["n"] >= limit or (state["reached"] is not None and state["n"] >= min_trials)

    cheap = strategy.hydra_order or (strategy.sampler or {}).get("_target_") == "optuna.samplers.RandomSampler"
    limit = len(table.results) if cheap else min(len(table.results), max_trials)  # random: no model to fit
    baseline = baseline_of(table)
    if strategy.hydra_order:
        for config in table.order:
            result = table.results[key_of(config, keys)]
            record(result, result["metrics"].get("trial_wall_s", 0.0))
            if done():
                break
        return _finish(state, limit, state["reached"] or state["n"])

    import optuna

    from search.record import ACCURACY_FROM_ATTR, METRIC_NAMES_ATTR, START_ATTR, STOPPED_EARLY
    from search.sweep.constraints import parse_constraints
    from search.sweep.gp_view import gp_view
    from search.sweep.baseline import accuracy_floor
    from search.sweep.early_stopping import probe_bar, tell_stopped
    from search.sweep.no_repeat import ask_unseen
    from search.sweep.outcome import score, tell
    from search.sweep.patience import search_ended
    from search.sweep.per_second import Known
    from search.sweep.roles import enqueue
    from search.sweep.rule_sampler import RuleAwareSampler
    from search.sweep.settled import at_floor, below_floor
    from search.sweep.space import build_space
    from search.sweep.start_combination import enqueue_next
    from search.sweep.staging import SPEED_ONLY, maths_key
    from search.sweep.start_design import WORK_NEUTRAL, enqueue_start, one_knob_at_a_time, starts_from_design
    from search.sweep.study import make_sampler

    dists = build_space(table.space, []).distributions

    def forbids(params: dict) -> object | None:
        if set(params) != set(keys):
            return None
        result = table.results.get(key_of(params, keys))
        return result if result is not None and result["outcome"] == "infeasible" else None

    node = dict(strategy.sampler) if strategy.sampler else default_sampler_node()
    base = make_sampler(node, seed, dists)
    settled = below_floor(ACCURACY_TOLERANCE) if strategy.settled and strategy.staging \
        and strategy.search_for == "answer" else None  # as the sweeper passes it (search/sweep/settled.py)
    known = Known(at_floor(ACCURACY_TOLERANCE), settled, _Broken.wrap(forbids)) \
        if strategy.per_second and strategy.staging else None  # as the sweeper passes it (search/sweep/per_second.py)
    directed = gp_view(base, strategy.search_for, OPTIMISED_METRICS, DIRECTIONS, ACCURACY_TOLERANCE,
                       strategy.stopped_unknown, strategy.same_maths, known) if strategy.gp_view else base
    reached = at_floor(ACCURACY_TOLERANCE) if settled is not None and strategy.cheap_repairs else None
    sampler = RuleAwareSampler(directed, _Broken.wrap(forbids), seed, avoid_repeats=strategy.avoid_repeats,
                               settled=settled, reached=reached)
    study = optuna.create_study(directions=DIRECTIONS, sampler=sampler)
    study.set_user_attr(METRIC_NAMES_ATTR, OPTIMISED_METRICS)
    margin, startup = sweep_defaults()
    train = _train_settings(table)
    rng = random.Random(seed)
    constraints = parse_constraints([f"val_accuracy >= {floor}"] if strategy.floor_as_constraint else [])
    enqueue(study, baseline, "baseline")  # as the sweep does: its accuracy sets the floor (search/sweep/gp_view.py)
    from_design = strategy.start_design == "any sampler" or starts_from_design(strategy.start_design,
                                                                               strategy.search_for == "answer", base)
    if from_design:
        neutral = frozenset() if strategy.move_work_neutral else WORK_NEUTRAL
        enqueue_start(study, one_knob_at_a_time(baseline, dists, _Broken.wrap(forbids), random.Random(seed),
                                                work_neutral=neutral,
                                                first=SPEED_ONLY if strategy.speed_only_first else frozenset()))
    first = True
    trained: dict[tuple, tuple[int, dict]] = {}  # maths -> the replay's trial that trained it in full, its result
    while not done():
        if strategy.combine and strategy.search_for == "answer":  # as the sweep's proposals do (trial_loop.py)
            enqueue_next(study, accuracy_floor(study, ACCURACY_TOLERANCE), _Broken.wrap(forbids),
                         dists if strategy.halfway else None, strategy.halfway_from_stopped)
        trial = ask_unseen(study, dists, rng, _Broken.wrap(forbids))
        config = {k: trial.params[k] for k in keys}
        result = table.results[key_of(config, keys)]
        floor_known = accuracy_floor(study, ACCURACY_TOLERANCE) if strategy.search_for == "answer" else None
        moved = START_ATTR in trial.user_attrs and not strategy.stop_start_moves
        bar = None if first or moved or not strategy.early_stopping else probe_bar(
            study.get_trials(deepcopy=False), margin, startup, floor_known)
        maths = maths_key(config)
        if strategy.staging and not first and result["outcome"] == "ok" and maths in trained:
            result, cost = staged_result(config, result, trained[maths][1], train)
            trial.set_user_attr(ACCURACY_FROM_ATTR, trained[maths][0])  # as staging marks it
        else:
            result, cost = stopped_result(table, config, result, bar, train, strategy.short_probe)
            if result["outcome"] == "ok":
                trained.setdefault(maths, (trial.number, result))
        first = False
        for stamp, at in (("search.launched_unix_s", 0.0), ("search.ended_unix_s", cost)):
            trial.set_user_attr(stamp, at)  # as the trial loop stamps it: what the trial costs (trial_cost.py)
        scored = score(result, OPTIMISED_METRICS, 2, constraints)
        if scored.outcome == STOPPED_EARLY and strategy.stopped is not None:
            for k, v in (("outcome", scored.outcome), ("reason", scored.reason), ("metrics", scored.metrics)):
                trial.set_user_attr(k, v)
            tell_stopped(study, trial, scored.metrics, scored.constraints, DIRECTIONS, strategy.stopped)
        else:
            tell(study, trial, scored, DIRECTIONS)
        record(result, cost)
        if strategy.patience and from_design and search_ended(  # as the sweeper applies it (_patience_trials)
                study, accuracy_floor(study, ACCURACY_TOLERANCE), strategy.patience, 0.0):
            state["sweep_s"] = state["sweep_s"] or state["seconds"]  # the search ended here (patience.py)
            break
    numbers = len(study.trials)
    if state["reached"] is not None:  # trial numbers up to the one that reached the target
        ran = [t for t in study.trials if t.user_attrs.get("outcome") != "skipped"]
        numbers = ran[state["reached"] - 1].number + 1
    return _finish(state, limit, numbers)


class _Broken:
    """forbids() for the replay: a cell the table says is infeasible breaks a rule with all its knobs."""

    def __init__(self, result: dict, keys: list[str]):
        self.fields = keys
        self.result = result

    @staticmethod
    def wrap(forbids):
        def check(params):
            result = forbids(dict(params))
            return None if result is None else _Broken(result, list(params))
        return check


def _finish(state: dict, limit: int, numbers: int) -> dict:
    reached = state["reached"]
    return {"trials_to_target": reached or limit, "numbers_to_target": numbers if reached else limit,
            "seconds_to_target": state["reached_s"] if reached else state["seconds"], "reached": reached is not None,
            "hv": state["hv"], "sweep_s": state["sweep_s"]}


def summarise(runs: list[dict], grid_hv: float) -> dict:
    trials = [r["trials_to_target"] for r in runs]
    seconds = [r["seconds_to_target"] for r in runs]
    hvs = [r["hv"] for r in runs if r["hv"] is not None]
    sweeps = [r["sweep_s"] for r in runs if r.get("sweep_s") is not None]
    return {"median": statistics.median(trials), "mean": statistics.fmean(trials),
            "p90": sorted(trials)[int(0.9 * (len(trials) - 1))], "max": max(trials),
            "numbers": statistics.median(r["numbers_to_target"] for r in runs),
            "seconds": statistics.median(seconds), "seconds_mean": statistics.fmean(seconds),
            "missed": sum(not r["reached"] for r in runs),
            "hv": statistics.fmean(hvs) / grid_hv if len(hvs) == len(runs) else None,
            "sweep_s": statistics.median(sweeps) if len(sweeps) == len(runs) else None}


def line_of(name: str, s: dict) -> str:
    hv = f"{s['hv']:.3f}" if s["hv"] is not None else "-"
    return (f"{name:58s}  trials to target mean {s['mean']:6.1f} median {s['median']:5.1f} max {s['max']:4d}  "
            f"numbers {s['numbers']:5.1f}  seconds median {s['seconds']:6.0f} mean {s['seconds_mean']:6.0f}  "
            f"{SWEEP_TRIALS} trials {_sweep_text(s)} s  HV@{HV_AT} {hv}  missed {s['missed']}")


def _sweep_text(s: dict) -> str:
    """The median seconds of a strategy's first SWEEP_TRIALS trials, '-' when a run ended before (or a saved run
    of an older replay has none)."""
    return f"{s['sweep_s']:.0f}" if s.get("sweep_s") is not None else "-"


def median_text(s: dict) -> str:
    """The median trials, or "> 40" when most runs had not reached the target by then (capped)."""
    if s["median"] >= MAX_TRIALS and s["missed"]:
        return f"> {MAX_TRIALS} ({s['missed']} runs not there after {MAX_TRIALS})"
    return f"{s['median']:.1f}"


def verdict(rows: dict[str, dict]) -> tuple[float, bool]:
    ratio = rows["default"]["median"] / rows["random"]["median"]
    return ratio, rows["default"]["median"] <= GOAL_MEDIAN and ratio <= GOAL_RATIO


def render_table(table: Table, baseline: dict, floor: float, target: float, rows: dict[str, dict]) -> list[str]:
    meta = table.meta
    ok = sum(r["outcome"] == "ok" for r in table.results.values())
    meeting = sum(r["outcome"] == "ok" and r["metrics"].get("val_accuracy", 0) >= floor
                  for r in table.results.values())
    hits = sum(r["outcome"] == "ok" and r["metrics"].get("val_accuracy", 0) >= floor
               and r["metrics"]["throughput_samples_per_s"] >= target for r in table.results.values())
    base = table.results[key_of(baseline, list(table.space))]["metrics"]
    ratio, met = verdict(rows)
    d, r = rows["default"], rows["random"]
    space_text = (f"{len(table.results)} configurations ({ok} ran ok), "
                  + ", ".join(f"`{k}={v}`" for k, v in table.space.items()))
    return [
        f"### {label(table)}", "",
        (f"Measured by parts (no table of cells): {space_text}, at `{' '.join(meta['overrides'])}`. Models: "
         f"`scripts/bench/data/{table.name}.seeds.csv` (+ `.json`), `{meta['seeds']['command']}` on "
         f"{meta['seeds']['date'][:10]} ({meta['seeds']['wall_s'] / 60:.0f} min): every model (the grid less its "
         f"speed-only knobs) trained whole at training seeds {', '.join(map(str, training_seeds(table)))}. "
         f"Works: `scripts/bench/data/{table.name}.works.csv` (+ `.json`), `{meta['works']['command']}` on "
         f"{meta['works']['date'][:10]} ({meta['works']['wall_s'] / 60:.0f} min): every work (the grid less the "
         f"learning rate) throughput-only, each pass in a shuffled order  "
         if meta.get("by_parts") else
         f"Table: `scripts/bench/data/{table.name}.csv` (+ `.json`: command, machine, date, load), measured by "
         f"`{meta['command']}` on {meta['date'][:10]} ({meta['wall_s'] / 60:.0f} min) with "
         f"`{' '.join(meta['overrides'])}`: {space_text}  "),
        f"Machine: {meta['machine']}  ",
        ("A cell: its model's val_accuracy, " + ("the mean over the training seeds" if meta.get("denoised") else
                                                  "at training seed 0 alone (`--as-measured`)")
         + "; its work's throughput, the fastest pass; its trial_wall_s its model's, the training time scaled to "
           "that throughput  " if meta.get("by_parts") else
         "Read by what each knob can change (`denoised`): a cell's val_accuracy is "
         + (seeds_text(table, meta["seeds"]) if table.seed_accuracy is not None else
            "the median of the cells of its maths (they differ only in speed-only knobs)") + ", its throughput "
         + (works_text(table, meta["works"]) if table.work_speed is not None else
            "the fastest of the cells of its work (they differ only in the learning rate)") + "  "
         if meta.get("denoised") else "Read as measured (`--as-measured`): each cell's own single measurement  "),
        f"Baseline (conf/config.yaml{objective_text(meta)}): " + ", ".join(f"{k}={v}" for k, v in baseline.items())
        + (f": {base['throughput_samples_per_s']:.0f} samples/s, val_accuracy {base['val_accuracy']:.4f}; "
           f"floor {floor:.4f}; target {target:.0f} samples/s ({meeting} configurations meet the floor, {hits} of "
           f"them the target)"), "",
        (f"**Default: median {median_text(d)} trials to the target (mean {d['mean']:.1f}, worst {d['max']}), "
         f"{d['seconds']:.0f} s; random search {r['median']:.1f} trials, {r['seconds']:.0f} s: ratio {ratio:.2f}** "
         f"({'meets' if met else 'MISSES'} the goal: median <= {GOAL_MEDIAN} and <= 1/4 of random search's)."), "",
        (f"| strategy | trials to target: median | mean | p90 | max | trial numbers (median) | seconds: median "
         f"| mean | seconds of {SWEEP_TRIALS} trials: median | HV@{HV_AT} | not reached in {MAX_TRIALS} |"),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *[f"| {name} | {s['median']:.1f} | {s['mean']:.1f} | {s['p90']} | {s['max']} | {s['numbers']:.1f} | "
          f"{s['seconds']:.0f} | {s['seconds_mean']:.0f} | {_sweep_text(s)} | "
          + (f"{s['hv']:.3f}" if s["hv"] is not None else "-") + f" | {s['missed']} |" for name, s in rows.items()],
        "",
    ]


def objective_text(meta: dict) -> str:
    """The grid's overrides other than its budget's (` with objective=gpt`), or ''."""
    return "".join(f" with {o}" for o in meta.get("overrides", []) if not o.startswith("train."))


def seeds_text(table: Table, seeds: dict) -> str:
    """Where a denoised cell's accuracy comes from when the grid's models were trained at other seeds too."""
    return (f"the mean over training seeds {', '.join(map(str, training_seeds(table)))} (seed 0: the table's, "
            f"the median of the cells of its maths, which differ only in speed-only knobs; the others: "
            + " then ".join(f"`{c}`" for c in seeds["command"].split("; "))
            + f" from {seeds['date'][:10]}, {seeds['wall_s'] / 60:.0f} min in all, "
            f"`scripts/bench/data/{table.name}.seeds.csv`)")


def works_text(table: Table, works: dict) -> str:
    """Where a denoised cell's throughput comes from when the grid's works were timed on their own."""
    from search.sweep.start_design import WORK_NEUTRAL

    whose = ("its work's (the cells that differ only in the learning rate)" if WORK_NEUTRAL & set(table.space)
             else "its own")
    return (f"{whose} fastest pass in `{works['command']}` "
            f"on {works['date'][:10]} ({works['wall_s'] / 60:.0f} min; {works['machine']}; throughput-only, each "
            f"pass in a shuffled order; `scripts/bench/data/{table.name}.works.csv`), "
            f"its trial_wall_s with its training time scaled to that throughput")


def render(command: str, seeds: int, sections: list[list[str]], default_node: dict, load: str, wall_s: float,
           note: str) -> str:
    lines = [
        SECTION, "",
        f"Command: `{command}` (replay: {wall_s:.0f} s, load average {load})  ",
        f"Default sampler: `{json.dumps(default_node)}`; {seeds} seeds per strategy and grid.", "",
        ("A replay starts with the baseline (the user's config) as trial 0 and counts it. Trials: trials that ran "
         "(finished, stopped early, infeasible); trial numbers also count the repeats the sweep skipped as failed "
         "trials (the old way; with repeats repaired inside the sampler there are none). Seconds: the trials' "
         "measured trial_wall_s, a stopped trial's start-up and training up to its probe, a timed-only trial's "
         "(staging: its maths trained earlier in the replay) up to the end of its windows; seconds of "
         f"{SWEEP_TRIALS} trials: what a default sweep's search costs, the target reached or not. HV@10: the "
         "hypervolume of "
         "the (throughput / grid max, val_accuracy) front after 10 trials, as a fraction of the whole grid's. "
         "Hydra's grid order is one fixed sequence, the same for every seed."), "",
    ]
    for section in sections:
        lines += section
    if note:
        lines += [note, ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=Path, nargs="+", default=TABLES)
    parser.add_argument("--table", type=Path, help="one table only (the quick test's)")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--accuracy-floor", type=float, default=None,
                        help="instead of the baseline's val_accuracy minus the tolerance")
    parser.add_argument("--strategies", nargs="*", default=list(STRATEGIES), choices=list(STRATEGIES))
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
    parser.add_argument("--note", default="", help="a paragraph for the doc: what the figures mean")
    parser.add_argument("--save", type=Path, help="also write the figures to this JSON file (for --merge)")
    parser.add_argument("--merge", type=Path, nargs="+",
                        help="write the doc from saved runs (one grid each, run apart to share the CPU)")
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.note)
    if args.seeds < 2:
        print(f"search_efficiency: --seeds must be >= 2; got {args.seeds}; fix: --seeds 30", file=sys.stderr)
        return 2
    if args.training_seeds is not None and 0 not in args.training_seeds:
        print(f"search_efficiency: --training-seeds must include 0, the table's own seed (its cells' speed and "
              f"outcome come from it); got {' '.join(map(str, args.training_seeds))}; fix: --training-seeds 0 "
              + " ".join(map(str, args.training_seeds)), file=sys.stderr)
        return 2
    if args.target_fraction != TARGET_FRACTION and not (args.no_write and not args.save):
        print(f"search_efficiency: the doc's goal is at {TARGET_FRACTION} of the best throughput, so another "
              f"--target-fraction prints only; got {args.target_fraction}; fix: add --no-write, without --save",
              file=sys.stderr)
        return 2
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    started = time.perf_counter()
    tables = [args.table] if args.table else (TABLES[:1] if args.quick else args.tables)
    strategies = QUICK_STRATEGIES if args.quick else [s for s in ("default", "random") if s in args.strategies] + [
        s for s in args.strategies if s not in ("default", "random")]
    seeds = 2 if args.quick else args.seeds
    sections, verdicts, seeds_used = [], [], set()
    for path in tables:
        table = read_grid(path, not args.as_measured, args.training_seeds)
        seeds_used.add(averaged_seeds(table))
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
            trials = (0, 8) if args.quick else (max(HV_AT, SWEEP_TRIALS), MAX_TRIALS)  # at least, at most
            runs = [replay(table, name, seed, floor, target, *trials) for seed in range(seeds)]
            rows[name] = summarise(runs, grid_hv)
            print(line_of(name, rows[name]) + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
        if args.save:
            shown = "python scripts/bench/search_efficiency.py" + "".join(f" {shlex.quote(a)}" for a in argv)
            args.save.write_text(json.dumps({"table": str(path.resolve().relative_to(REPO)),
                                             "command": shown, "seeds": seeds, "rows": rows,
                                             "denoised": not args.as_measured,
                                             "training_seeds": args.training_seeds,
                                             "wall_s": time.perf_counter() - started, "load": load_averages()}))
        if "default" not in rows or "random" not in rows:  # a run of some strategies, for --merge
            continue
        ratio, met = verdict(rows)
        verdicts.append((label(table), ratio, met, median_text(rows["default"]), median_text(rows["random"])))
        print(f"{table.name}: default / random trials to target: {ratio:.2f} (medians; goal: default median <= "
              f"{GOAL_MEDIAN}, ratio <= {GOAL_RATIO:.2f}): "
              + ("not judged (--quick: model-based runs stop at 8 trials)" if args.quick else
                 f"not judged (the target at {args.target_fraction} of the best, the goal's at {TARGET_FRACTION})"
                 if args.target_fraction != TARGET_FRACTION else
                 "met" if met else "missed"), flush=True)
        sections.append(render_table(table, baseline, floor, target, rows))
    if not args.quick and not args.no_write:
        shown = [a for i, a in enumerate(argv) if a != "--note" and (i == 0 or argv[i - 1] != "--note")]
        command = "python scripts/bench/search_efficiency.py" + "".join(f" {shlex.quote(a)}" for a in shown)
        write_section(SECTION, render(command, seeds, sections, default_sampler_node(), load_averages(),
                                      time.perf_counter() - started, args.note))
        update_summary("Search efficiency", summary_figure(verdicts, seeds, seeds_used), all(v[2] for v in verdicts))
        print("updated docs/BENCHMARKS.md")
    return 0


def summary_figure(verdicts: list[tuple], seeds: int, seeds_used: set[int | None]) -> str:
    """The summary row's figure: each grid's medians and ratio; how many training seeds its accuracy averages."""
    grids = [f"{name}: median {d} trials vs random {r} (ratio {ratio:.2f})" for name, ratio, _, d, r in verdicts]
    averaged = sorted(n for n in seeds_used if n is not None)
    return ("; ".join(grids) + f", {seeds} seeds, replayed on measured grids"
            + (f" (val_accuracy: the mean of {'/'.join(map(str, averaged))} training seeds)" if averaged else ""))


def merge(paths: list[Path], note: str) -> int:
    """The doc's section from runs saved with --save; runs of the same grid add their strategies (the default
    first, then in the order given), so strategies can run apart to share the CPU."""
    grids: dict[tuple, dict] = {}
    for path in paths:
        saved = json.loads(path.read_text())
        seeds_read = saved.get("training_seeds")
        read = (saved["table"], saved.get("denoised", False), tuple(seeds_read) if seeds_read is not None else None)
        grid = grids.setdefault(read, {"rows": {}, "commands": [], "seeds": set()})
        grid["rows"].update(saved["rows"])
        command = re.sub(r" --save \S+", "", saved["command"])
        grid["commands"].append(f"`{command}` "
                                f"({saved['wall_s']:.0f} s, load average {saved['load']})")
        grid["seeds"].add(saved["seeds"])
    sections, verdicts, commands, seeds, seeds_used = [], [], [], set(), set()
    for (name, denoise, seeds_read), grid in grids.items():
        table = read_grid(REPO / name if not Path(name).is_absolute() else Path(name), denoise,
                          list(seeds_read) if seeds_read is not None else None)
        seeds_used.add(averaged_seeds(table))
        baseline = baseline_of(table)
        floor = floor_of(table, baseline, None)
        rows = {k: grid["rows"][k] for k in ["default", "random", *grid["rows"]] if k in grid["rows"]}
        sections.append(render_table(table, baseline, floor, target_of(table, floor), rows))
        ratio, met = verdict(rows)
        verdicts.append((label(table), ratio, met, median_text(rows["default"]), median_text(rows["random"])))
        commands += grid["commands"]
        seeds |= grid["seeds"]
    lines = render("", min(seeds), sections, default_sampler_node(), "", 0.0, note).splitlines()
    lines[2] = ("Commands, each with `--save FILE`, then `--merge FILE...` to write this section: "
                + "; ".join(commands) + "  ")
    write_section(SECTION, "\n".join(lines))
    update_summary("Search efficiency", summary_figure(verdicts, min(seeds), seeds_used), all(v[2] for v in verdicts))
    print("updated docs/BENCHMARKS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Measured grids as the replay reads them: one result per configuration of a search space.

A grid is a table (`<grid>.csv`, one row per configuration and pass, written
by measure_grid.py or scripts/bench/landscapes.py) with a JSON side file
(`space`, `overrides`, `machine`, ...). measure_grid.py may also have timed
each work on its own (`<grid>.works.csv`) and trained each model again at
other training seeds (`<grid>.seeds.csv`); a grid measured by parts has no
table of cells and is composed from those two.

By default a table is read by what each knob can change (`denoised`): a
cell's accuracy is the median of its maths's cells (they differ only in
speed-only knobs), or the mean over the training seeds measured; its
throughput the fastest of its work's cells (they differ only in the
learning rate), or its work's fastest pass timed on its own. One
measurement per cell on a shared machine is noisier than the effects the
search looks for, and no search can learn which cell a lucky measurement
put above the floor.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

TARGET_FRACTION = 0.95
ACCURACY_TOLERANCE = 0.005  # hydra.sweeper.accuracy_tolerance's default

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
    from objectives.knobs import SPEED_ONLY, WORK_NEUTRAL

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


def train_settings(table: Table) -> dict:
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


def steps_of(config: dict, train: dict) -> int:
    """A trial's optimizer steps at the budget (its global batch: per-device batch times devices)."""
    return train["budget_samples"] // (int(config["batch_size"]) * int(config.get("parallel.devices", 1)))


def _cost_up_to(m: dict, steps_run: int, steps: int) -> float:
    """A measured cell's wall time had it trained `steps_run` of its `steps` and not been evaluated: its start-up
    (trial_wall_s less its training and evaluation) plus that share of its training time."""
    train_s = m.get("train_wall_s", 0.0)
    return m.get("trial_wall_s", 0.0) - train_s - m.get("eval_wall_s", 0.0) + train_s * min(1.0, steps_run / steps)


def stopped_result(config: dict, result: dict, bar: float, train: dict) -> tuple[dict, float]:
    """What the trial returns and how long it takes told to stop below `bar`, early stopping applied as the trial
    applies it (objectives/in_trial_stopping.py probe_end_step, on the trial's own window plan)."""
    from objectives.in_trial_stopping import probe_end_step
    from objectives.timing import plan_windows

    m = result["metrics"]
    wall = m.get("trial_wall_s", 0.0)
    if result["outcome"] != "ok":
        return result, wall
    steps = steps_of(config, train)
    plan = plan_windows(steps, train["warmup_steps"], train["window_steps"])
    probe_end = probe_end_step(train["probe_steps"], plan, steps)
    thr = m["throughput_samples_per_s"]
    if not probe_end or thr >= bar:
        return result, wall
    return {"outcome": "stopped_early", "reason": f"probe {thr:.4g} below {bar:.4g}",
            "metrics": {"throughput_samples_per_s": thr, "probe_throughput_samples_per_s": thr}}, \
        _cost_up_to(m, probe_end, steps)


def timed_only_cost(config: dict, result: dict, train: dict) -> float:
    """A trial staging runs throughput-only (its maths trained in full earlier): its start-up and the training
    steps up to the end of its windows (objectives/timing.py throughput_only_steps)."""
    from types import SimpleNamespace

    from objectives.timing import throughput_only_steps

    steps = steps_of(config, train)
    return _cost_up_to(result["metrics"], throughput_only_steps(SimpleNamespace(**train), steps), steps)

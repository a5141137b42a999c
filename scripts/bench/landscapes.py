"""Synthetic landscapes: grid tables in the format of scripts/bench/data/*.csv (+ .json) that no trial measured,
each a known shape (an out-of-memory wall, a needle, a plateau, interactions, noise, ...), so a search can be
replayed on shapes the measured grids do not have (scripts/bench/search_efficiency.py --table).

A cell's throughput is the product of the factors of the terms that apply to it, its val_accuracy their sum
(landscape_shapes.py), plus seeded noise where the landscape has some: drawn per work for throughput (cells that
differ only in the learning rate share it) and per model for accuracy (cells that differ only in speed-only knobs
share it), so the knobs' conventions hold. Its times follow from its throughput: training is the budget over
the throughput, a trial its start-up, training, evaluation and compile time.

    python scripts/bench/landscapes.py                           # the named library -> scripts/bench/data/landscapes/
    python scripts/bench/landscapes.py --check                   # exit 1 where the files differ from what it writes
    python scripts/bench/landscapes.py --random 5 --seed 1 --out /tmp/rl   # the random family
    python scripts/bench/landscapes.py --doc                     # the library's table for docs/landscapes.md
"""
from __future__ import annotations

import argparse
import csv
import functools
import io
import itertools
import json
import math
import sys
import zlib
from pathlib import Path

import numpy as np

from landscape_shapes import GPU_TIMES, HALF, LIBRARY, OOM, Landscape, cpu, gpu, on, per_value, wall

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository: objectives/ and search/, imported lazily
LIBRARY_DIR = HERE / "data" / "landscapes"
STATUS = ["pass", "outcome", "reason"]
METRICS = ["throughput_samples_per_s", "val_accuracy", "val_loss", "throughput_cv", "train_wall_s", "eval_wall_s",
           "trial_wall_s"]
LOAD = ["load_avg_1min", "other_cores_during"]
TOLERANCE = 0.005  # the sweep's accuracy tolerance: the floor is the baseline's val_accuracy minus this
MAX_CELLS = 1000
MIN_GAIN = 1.2  # the fastest cell at the floor must beat the baseline by this much
DATE = "synthetic"
NOTE = ("synthetic: written by scripts/bench/landscapes.py from the terms in scripts/bench/landscape_shapes.py; no "
        "trial ran, so load_avg_1min and other_cores_during are 0")


@functools.lru_cache(maxsize=None)
def composed(overrides: tuple[str, ...]) -> dict:
    """conf/ composed with a landscape's overrides, as the replay composes it."""
    from repeatability import compose

    return compose(list(overrides))


def baseline(overrides: tuple[str, ...], keys: tuple[str, ...]) -> dict:
    """The user's config at these overrides (conf/'s defaults, dotted keys), as the replay's baseline_of reads it."""
    out = {}
    for k in keys:
        value = composed(overrides)
        for part in k.split("."):
            value = value[part]
        out[k] = value
    return out


@functools.lru_cache(maxsize=None)
def roles() -> tuple[frozenset, frozenset]:
    """The speed-only and the work-neutral knobs (objectives/knobs)."""
    from objectives.knobs import SPEED_ONLY, WORK_NEUTRAL

    return SPEED_ONLY, WORK_NEUTRAL


def grammar(values: list) -> str:
    """A knob's values in Hydra's sweep grammar."""
    return "choice(" + ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values) + ")"


def check_terms(ls: Landscape) -> None:
    """Terms and walls name knobs and values of the space; accuracy terms only maths knobs, speed terms no
    work-neutral knob (the knobs' conventions)."""
    speed_only, work_neutral = roles()
    for t in [*ls.terms, *ls.walls]:
        for k, values in t.when:
            if k not in ls.space or any(v not in ls.space[k] for v in values):
                raise ValueError(f"{ls.name}: {t} names {k}={values}, not in the space {ls.space.get(k)}")
    for t in ls.terms:
        knobs = {k for k, _ in t.when}
        if t.accuracy and knobs & speed_only:
            raise ValueError(f"{ls.name}: accuracy term on speed-only knobs: {t}")
        if t.speed != 1.0 and knobs & work_neutral:
            raise ValueError(f"{ls.name}: speed term on work-neutral knobs: {t}")


def draw(ls: Landscape, kind: int, key: tuple) -> float:
    """A seeded uniform draw in [-1, 1) for one work (kind 0), one model (1) or one cell's cv (2)."""
    return float(np.random.default_rng([ls.seed, kind, zlib.crc32(repr(key).encode())]).uniform(-1.0, 1.0))


def cells(ls: Landscape) -> list[dict]:
    """Every configuration, the last knob fastest (Hydra's BasicSweeper order)."""
    return [dict(zip(ls.space, combo)) for combo in itertools.product(*ls.space.values())]


def result(ls: Landscape, cell: dict, budget: int) -> dict:
    """One cell's row: outcome, reason and metrics (unrounded)."""
    speed_only, work_neutral = roles()
    startup = ls.startup_s + 0.5 * cell.get("loader.num_workers", 0)
    compile_s = ls.compile_s.get(cell.get("parallel.compile", "none"), 0.0)
    hit = next((w for w in ls.walls if w.applies(cell)), None)
    if hit is not None:
        spent = startup + (compile_s + 2.0 if hit.outcome == "oom" else 0.0)  # an oom ends at the first step
        return {"outcome": hit.outcome, "reason": hit.reason, "trial_wall_s": spent}
    terms = [t for t in ls.terms if t.applies(cell)]
    thr = ls.speed * math.prod(t.speed for t in terms)
    acc = ls.accuracy + sum(t.accuracy for t in terms)
    work = tuple((k, v) for k, v in cell.items() if k not in work_neutral)
    maths = tuple((k, v) for k, v in cell.items() if k not in speed_only)
    thr *= 1.0 + ls.noise * draw(ls, 0, work)
    acc = min(1.0, max(0.0, acc + ls.accuracy_noise * draw(ls, 1, maths)))
    train = budget / thr
    return {"outcome": "ok", "reason": "", "throughput_samples_per_s": thr, "val_accuracy": acc,
            "val_loss": 0.3 + 4.0 * (1.0 - acc), "throughput_cv": 0.035 + 0.5 * ls.noise + 0.015 * draw(ls, 2, work),
            "train_wall_s": train, "eval_wall_s": ls.eval_s,
            "trial_wall_s": startup + train + ls.eval_s + compile_s}


FORMATS = {"throughput_samples_per_s": "{:.2f}", "val_accuracy": "{:.4f}", "val_loss": "{:.4f}",
           "throughput_cv": "{:.3f}", "train_wall_s": "{:.3f}", "eval_wall_s": "{:.3f}", "trial_wall_s": "{:.3f}"}


def rows(ls: Landscape) -> list[dict]:
    """The table's rows as written: knob values as str() of Hydra's parse, metrics rounded."""
    budget = int(baseline(tuple(ls.overrides), ("train.budget_samples",))["train.budget_samples"])
    out = []
    for cell in cells(ls):
        r = result(ls, cell, budget)
        out.append({**{k: str(v) for k, v in cell.items()}, "pass": "1", "outcome": r["outcome"],
                    "reason": r["reason"], **{m: FORMATS[m].format(r[m]) if m in r else "" for m in METRICS},
                    "load_avg_1min": "0.00", "other_cores_during": "0.00"})
    return out


def best(ls: Landscape, table: list[dict]) -> tuple[dict, dict, float]:
    """The baseline's row, the fastest row at the floor and its throughput over the baseline's; raises where
    the landscape breaks the library's rules (baseline missing or not ok, no clear gain at the floor)."""
    base = baseline(tuple(ls.overrides), tuple(ls.space))
    key = {k: str(v) for k, v in base.items()}
    row = next((r for r in table if all(r[k] == v for k, v in key.items())), None)
    if row is None or row["outcome"] != "ok":
        raise ValueError(f"{ls.name}: the baseline {base} must be a cell that ran ok; got {row and row['outcome']}")
    floor = float(row["val_accuracy"]) - TOLERANCE
    good = [r for r in table if r["outcome"] == "ok" and float(r["val_accuracy"]) >= floor]
    top = max(good, key=lambda r: float(r["throughput_samples_per_s"]))
    gain = float(top["throughput_samples_per_s"]) / float(row["throughput_samples_per_s"])
    if len(table) > MAX_CELLS or gain <= MIN_GAIN:
        raise ValueError(f"{ls.name}: needs <= {MAX_CELLS} cells and a cell at the floor > {MIN_GAIN}x the "
                         f"baseline; got {len(table)} cells, best {gain:.2f}x")
    return row, top, gain


def where_best(ls: Landscape, top: dict, gain: float) -> str:
    return "Best at the floor: " + ", ".join(f"{k}={top[k]}" for k in ls.space) + f" ({gain:.2f}x the baseline)."


def machine(hw: dict) -> str:
    if hw["gpu"]:
        return f"synthetic: {hw['gpu']} (1 GPU), {hw['cores']} cores"
    return f"synthetic: CPU only, {hw['cores']} cores, {'native' if hw['bf16_native'] else 'no native'} bf16"


def render(ls: Landscape, command: str) -> dict[str, str]:
    """The landscape's two files, name -> text."""
    check_terms(ls)
    table = rows(ls)
    _, top, gain = best(ls, table)
    text = io.StringIO()
    writer = csv.DictWriter(text, [*ls.space, *STATUS, *METRICS, *LOAD], lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    meta = {"command": command, "space": {k: grammar(v) for k, v in ls.space.items()}, "overrides": ls.overrides,
            "date": DATE, "machine": machine(ls.hardware), "wall_s": 0, "note": NOTE, "synthetic": True,
            "structure": f"{ls.structure} {where_best(ls, top, gain)}", "hardware": ls.hardware, "split": ls.split}
    return {f"{ls.name}.csv": text.getvalue(), f"{ls.name}.json": json.dumps(meta, indent=1) + "\n"}


def check_grammar(ls: Landscape) -> None:
    """Every value written is str() of what Hydra's grammar parses from the space (what key_of compares)."""
    from search.sweep.space import build_space

    dists = build_space({k: grammar(v) for k, v in ls.space.items()}, []).distributions
    for k, values in ls.space.items():
        if [str(c) for c in dists[k].choices] != [str(v) for v in values]:
            raise ValueError(f"{ls.name}: {k} parses as {dists[k].choices}, written as {values}")


# The random family: what a search is tuned on without seeing the library.
GPUS = [gpu("NVIDIA H100 80GB HBM3", 80.0, 16), gpu("NVIDIA H200", 141.0, 16), gpu("NVIDIA A100-SXM4-40GB", 40.0, 12),
        gpu("NVIDIA L4", 24.0, 8), gpu("NVIDIA A10G", 24.0, 8), gpu("Tesla V100-SXM2-16GB", 16.0, 8, bf16=False),
        gpu("Tesla T4", 16.0, 4, bf16=False)]
LADDERS = {"batch_size": [8, 16, 32, 64, 128, 256, 512, 1024], "model_pruning.ratio": [0.0, 0.25, 0.5, 0.75],
           "loader.num_workers": [0, 1, 2, 4, 8], "parallel.threads": [1, 2, 4, 8, 16, 32],
           "parallel.devices": [1, 2, 4], "parallel.grad_accum": [1, 2, 4],
           "optim.lr": [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05]}
OTHERS = ["precision", "model_pruning.ratio", "loader.num_workers", "optim.lr", "optim.fused",
          "parallel.compile"]
ON_GPU = ["memory.activation_checkpointing", "framework.channels_last", "parallel.grad_accum"]
ON_CPU = ["parallel.threads", "parallel.devices", "loader.persistent_workers"]


def random_hardware(rng: np.random.Generator) -> dict:
    if rng.random() < 0.5:
        return GPUS[rng.integers(len(GPUS))]
    cores = int(rng.choice([2, 4, 8, 16, 32]))
    return cpu(cores, bool(cores > 2 and rng.random() < 0.5))


def random_values(rng: np.random.Generator, knob: str, base, hw: dict) -> list:
    """A value set for one knob, the baseline's value among them: a run of its ladder around the baseline, or a
    subset of its categories."""
    if knob == "precision":
        pool = ["fp32", "tf32", "bf16", "fp16"] if hw["gpu"] else ["fp32", "bf16"]
        chosen = ["fp32", *[p for p in pool[1:] if rng.random() < 0.7]]
        return chosen if len(chosen) > 1 else pool[:2]
    if knob == "parallel.compile":
        return ["none", "default", "max-autotune"][:int(rng.integers(2, 4 if hw["gpu"] else 3))]
    if knob not in LADDERS:
        return [False, True]
    ladder = [v for v in LADDERS[knob] if knob not in ("parallel.threads", "loader.num_workers", "parallel.devices")
              or v <= hw["cores"]]
    at = ladder.index(base)
    n = min(len(ladder), int(rng.integers(2, 7)))
    top = at + 1 if knob == "batch_size" else at  # a batch above the baseline's, for walls and cliffs
    start = int(rng.integers(max(0, top - n + 1), min(at, len(ladder) - n) + 1))
    return ladder[start:start + n]


def speed_terms(rng: np.random.Generator, knob: str, space: dict, base, hw: dict) -> list:
    """Random throughput factors of one knob's values (1 at the baseline's): a trend in ladder steps with a
    random size, direction and bend, or a factor per category with a prior by hardware (persistent workers:
    only with workers)."""
    values = space[knob]
    if knob == "optim.lr" or (knob == "loader.persistent_workers" and "loader.num_workers" not in space):
        return []
    if knob == "loader.persistent_workers":
        return [on({knob: True, "loader.num_workers": tuple(w for w in space["loader.num_workers"] if w)},
                   rng.uniform(1.0, 1.06))]
    if knob in LADDERS:
        slope = {"batch_size": (0.05, 0.35), "parallel.threads": (0.1, 0.5), "parallel.devices": (0.2, 0.5)}.get(
            knob, (-0.05, 0.2))
        a, bend = rng.uniform(*slope) * (-1 if rng.random() < 0.15 else 1), -abs(rng.normal(0, 0.04))
        steps = {v: i - values.index(base) for i, v in enumerate(values)}
        return per_value(knob, {v: math.exp(a * x + bend * x * x) for v, x in steps.items() if x})
    ranges = {"tf32": (1.1, 1.4), "fp16": (1.3, 2.1) if hw["gpu"] else (0.5, 0.9),
              "bf16": (1.3, 2.0) if hw["bf16_native"] else (0.6, 0.95), "default": (0.95, 1.35),
              "max-autotune": (0.9, 1.45), "reduce-overhead": (0.95, 1.3)}
    by_knob = {"optim.fused": (0.98, 1.08), "memory.activation_checkpointing": (0.65, 0.85),
               "framework.channels_last": (0.9, 1.15)}
    return per_value(knob, {v: rng.uniform(*ranges.get(v, by_knob.get(knob, (1.0, 1.0)))) for v in values
                            if v != base})


def accuracy_terms(rng: np.random.Generator, knob: str, space: dict, base) -> list:
    """Random val_accuracy shifts of a maths knob: larger batches and more pruning lose, faster the further
    from the baseline (past a random cliff, by 2-10 points more), smaller batches gain a little; lower
    precision loses a little; the learning rate is a bowl whose best may move with the batch."""
    values = space[knob]
    if knob == "optim.lr":
        best = values[int(np.clip(values.index(base) + rng.integers(-1, 2), 0, len(values) - 1))]
        return _lr_terms(rng, space, best)
    if knob == "precision":
        return per_value(knob, accuracy={v: -rng.uniform(0, 0.003) for v in values if v != base})
    if knob not in ("batch_size", "model_pruning.ratio", "parallel.devices", "parallel.grad_accum"):
        return []
    at, loss, gain = values.index(base), rng.uniform(0.001, 0.008), rng.uniform(0.0, 0.003)
    cliff = at + int(rng.integers(1, 4)) if rng.random() < 0.5 else len(values)
    drop = rng.uniform(0.02, 0.1)
    shift = {v: -loss * (i - at) ** 1.5 - drop * (i >= cliff) if i > at else gain * (at - i)
             for i, v in enumerate(values) if i != at}
    return per_value(knob, accuracy=shift)


def _lr_terms(rng: np.random.Generator, space: dict, best: float) -> list:
    lrs, depth = space["optim.lr"], rng.uniform(0.004, 0.03)
    if "batch_size" not in space:
        return per_value("optim.lr", accuracy={lr: -depth * math.log2(lr / best) ** 2 for lr in lrs})
    exponent = rng.uniform(0.0, 1.0)
    return [on({"batch_size": b, "optim.lr": lr}, accuracy=-depth * math.log2(lr / (best * (b / 64) ** exponent)) ** 2)
            for b in space["batch_size"] for lr in lrs]


def interactions(rng: np.random.Generator, space: dict, base: dict) -> list:
    """One to three pairs of knobs whose values away from the baseline gain or lose together, beyond their own
    factors (both pay alone but not together, or one pays only with the other)."""
    pairs = list(itertools.combinations([k for k in space if k != "optim.lr"], 2))
    picked = rng.choice(len(pairs), min(len(pairs), int(rng.integers(1, 4))), replace=False).tolist()
    return [on({k: _away(rng, space[k], base[k], k in LADDERS) for k in pairs[j]},
               float(np.clip(math.exp(rng.normal(0, 0.35)), 0.5, 2.0))) for j in sorted(picked)]


def _away(rng: np.random.Generator, values: list, base, ordered: bool) -> tuple:
    """Some values of a knob other than the baseline's: on a ladder, those from a random step on (below the
    baseline where it is the highest); else a random subset."""
    others = [v for v in values if v != base]
    if ordered:
        side = values[values.index(base) + 1:] or others
        return tuple(side[int(rng.integers(len(side))):])
    return tuple(v for v in others if rng.random() < 0.7) or (others[0],)


def walls(rng: np.random.Generator, space: dict, base: dict, hw: dict) -> list:
    """A random out-of-memory wall at large batches (lower precision and checkpointing move it out), and the
    CPU's cores as a rule where ranks and threads are both searched."""
    out = []
    batches = space.get("batch_size", [])
    above = [b for b in batches if b > base["batch_size"]]
    if above and rng.random() < 0.7:
        at = above[int(rng.integers(len(above)))]
        full = {"precision": tuple(p for p in space["precision"] if p not in HALF)} if "precision" in space else {}
        free = {"memory.activation_checkpointing": False} if "memory.activation_checkpointing" in space else {}
        out.append(wall({"batch_size": tuple(b for b in batches if b >= at), **full, **free}, "oom", OOM))
        if full and len(full["precision"]) < len(space["precision"]) and at != batches[-1]:
            out.append(wall({"batch_size": tuple(b for b in batches if b > at), **free}, "oom", OOM))
    if "parallel.devices" in space and "parallel.threads" in space:
        over = [(d, t) for d in space["parallel.devices"] for t in space["parallel.threads"] if d * t > hw["cores"]]
        out += [wall({"parallel.devices": d, "parallel.threads": t}, "infeasible",
                     f"parallel.devices * parallel.threads must be <= the CPU cores available ({hw['cores']}); "
                     f"got {d} * {t} = {d * t}") for d, t in over]
    return out


def random_landscape(seed: int, i: int) -> Landscape:
    """The i-th landscape of the family at this seed: the first draw that keeps the library's rules."""
    for attempt in itertools.count():
        ls = _draw_landscape(np.random.default_rng([seed, i, attempt]), f"random_{seed}_{i}", seed, i)
        check_terms(ls)
        try:
            best(ls, rows(ls))
            return ls
        except ValueError:
            if attempt >= 200:
                raise


def _draw_landscape(rng: np.random.Generator, name: str, seed: int, i: int) -> Landscape:
    """One draw of the family: hardware, knobs and their values, effects, interactions, walls, noise, scale."""
    hw = random_hardware(rng)
    pool = OTHERS + (ON_GPU if hw["gpu"] else ON_CPU)  # with the batch size, always: walls and cliffs need it
    chosen = set(rng.choice(len(pool), int(rng.integers(3, 7)), replace=False).tolist())
    knobs = ["batch_size", *(k for j, k in enumerate(pool) if j in chosen)]
    budget = int(rng.choice([20000, 50000, 100000] if hw["gpu"] else [4000, 8000, 20000]))
    overrides = [f"train.budget_samples={budget}"]
    base = baseline(tuple(overrides), tuple(knobs))
    space = {k: random_values(rng, k, base[k], hw) for k in knobs}
    while math.prod(map(len, space.values())) > MAX_CELLS:  # the widest knob loses its end farthest from the baseline
        k = max(space, key=lambda k: len(space[k]))
        at = space[k].index(base[k])
        space[k] = space[k][1:] if at > len(space[k]) - 1 - at else space[k][:-1]
    speed_only = roles()[0]
    terms = [t for k in knobs for t in speed_terms(rng, k, space, base[k], hw)]
    terms += [t for k in knobs if k not in speed_only for t in accuracy_terms(rng, k, space, base[k])]
    pairs = interactions(rng, space, base)
    blocked = walls(rng, space, base, hw)
    noise = float(rng.uniform(0.0, 0.10))
    times = GPU_TIMES if hw["gpu"] else {"startup_s": 3.0, "eval_s": 0.5}
    structure = (f"Random family (seed {seed}, landscape {i}): {len(knobs)} knobs with random per-knob effects; "
                 + "; ".join(" x ".join(f"{k}={'/'.join(map(str, v))}" for k, v in t.when)
                             + f": {t.speed:.2f}x together"
                             for t in pairs)
                 + f"; {sum(w.outcome == 'oom' for w in blocked)} out-of-memory walls; {noise:.0%} throughput noise.")
    return Landscape(name, "AB"[i % 2], hw, space, terms + pairs, structure, blocked, overrides,
                     speed=float(math.exp(rng.uniform(math.log(500), math.log(20000)))) if hw["gpu"] else
                     float(rng.uniform(200, 3000)), accuracy=float(rng.uniform(0.6, 0.97)), noise=noise,
                     accuracy_noise=float(rng.uniform(0.0, 0.005)), seed=seed * 1000 + i, **times)


def write_all(landscapes: list[Landscape], out: Path, command: str, check: bool) -> int:
    """Write (or, with `check`, compare) every landscape's files; 1 where a file on disk differs."""
    if not check:
        out.mkdir(parents=True, exist_ok=True)
    stale = []
    for ls in landscapes:
        check_grammar(ls)
        for name, text in render(ls, command).items():
            path = out / name
            if check:
                if not path.exists() or path.read_text() != text:
                    stale.append(name)
            else:
                path.write_text(text)
    if stale:
        print(f"landscapes: {len(stale)} files differ from what the generator writes: {', '.join(stale)}; "
              f"fix: {command}", file=sys.stderr)
    return 1 if stale else 0


def doc_table(landscapes: list[Landscape]) -> str:
    """The library as a markdown table: name, cells, knobs, split, where the best is (the knobs it moves)."""
    lines = ["| landscape | cells | knobs | split | best at the floor: moves from the baseline |",
             "| --- | --- | --- | --- | --- |"]
    for ls in landscapes:
        base, top, gain = best(ls, rows(ls))
        moved = ", ".join(f"{k}={top[k]}" for k in ls.space if top[k] != base[k])
        lines.append(f"| `{ls.name}` | {math.prod(map(len, ls.space.values()))} | {', '.join(ls.space)} | "
                     f"{ls.split} | {moved} ({gain:.2f}x) |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare the files on disk instead of writing them")
    parser.add_argument("--random", type=int, metavar="N", help="N landscapes of the random family instead")
    parser.add_argument("--seed", type=int, default=0, help="the random family's seed")
    parser.add_argument("--out", type=Path, help="where to write (default: scripts/bench/data/landscapes/)")
    parser.add_argument("--doc", action="store_true", help="print the library's table for docs/landscapes.md")
    args = parser.parse_args(argv)
    if args.random is not None and args.out is None:
        print("landscapes: --random needs --out; got none; fix: --out /tmp/landscapes", file=sys.stderr)
        return 2
    if args.random is not None:
        landscapes = [random_landscape(args.seed, i) for i in range(args.random)]
        command = f"python scripts/bench/landscapes.py --random {args.random} --seed {args.seed} --out {args.out}"
    else:
        landscapes = [make() for make in LIBRARY]
        command = "python scripts/bench/landscapes.py"
    if args.doc:
        print(doc_table(landscapes))
        return 0
    return write_all(landscapes, args.out or LIBRARY_DIR, command, args.check)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

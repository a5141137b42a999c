"""Every benchmark's --quick mode runs and produces its figures.

Quick modes check that a benchmark still measures (a broken one fails
here); they never judge speed, so a slow or busy machine cannot fail them.
None of them may touch docs/BENCHMARKS.md.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, pythonpath

BENCH = REPO / "scripts" / "bench"
DOC = REPO / "docs" / "BENCHMARKS.md"


def bench(script: str, *args: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": pythonpath(), "MLFLOW_TRACKING_URI": f"sqlite:///{cwd}/mlflow.db"}
    before = DOC.read_text()
    proc = subprocess.run([sys.executable, str(BENCH / script), "--quick", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert DOC.read_text() == before, f"{script} --quick changed docs/BENCHMARKS.md"
    return proc.stdout


def numbers_after(line: str, word: str) -> float:
    return float(line.split(word, 1)[1].split()[0].rstrip("%"))


def test_grid_then_replay(tmp_path: Path) -> None:
    """measure_grid writes a table a replay can read; the replay reports every strategy
    (also against the stored table the docs' figures come from)."""
    out = bench("measure_grid.py", "--out", str(tmp_path / "grid"), cwd=tmp_path)
    with (tmp_path / "grid" / "digits_grid.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["outcome"] for r in rows] == ["ok", "ok"], out
    assert all(float(r["throughput_samples_per_s"]) > 0 and 0 <= float(r["val_accuracy"]) <= 1 for r in rows)
    assert (tmp_path / "grid" / "digits_grid.json").exists()
    # the works timed on their own (throughput-only, a shuffled order): the replay reads their throughput
    bench("measure_grid.py", "--works", "--out", str(tmp_path / "grid"), cwd=tmp_path)
    with (tmp_path / "grid" / "digits_grid.works.csv").open() as f:
        works = list(csv.DictReader(f))
    assert sorted(r["batch_size"] for r in works) == ["32", "64"] and all(r["outcome"] == "ok" for r in works)
    assert "val_accuracy" not in works[0] and float(works[0]["throughput_samples_per_s"]) > 0
    # the models trained again at another training seed: the replay reads a cell's accuracy as the mean
    bench("measure_grid.py", "--seeds", "1", "--out", str(tmp_path / "grid"), cwd=tmp_path)
    with (tmp_path / "grid" / "digits_grid.seeds.csv").open() as f:
        at_seed = list(csv.DictReader(f))
    assert sorted((r["batch_size"], r["seed"]) for r in at_seed) == [("32", "1"), ("64", "1")], at_seed
    assert all(0 <= float(r["val_accuracy"]) <= 1 and float(r["train_wall_s"]) > 0 for r in at_seed)
    bench("measure_grid.py", "--seeds", "2", "--out", str(tmp_path / "grid"), cwd=tmp_path)  # adds to the table
    meta = json.loads((tmp_path / "grid" / "digits_grid.seeds.json").read_text())
    assert meta["seeds"] == [1, 2] and meta["command"].count("measure_grid.py --quick --seeds") == 2, meta

    tiny = bench("search_efficiency.py", "--table", str(tmp_path / "grid" / "digits_grid.csv"),
                 "--accuracy-floor", "0", cwd=tmp_path)
    assert "throughput from digits_grid.works.csv" in tiny and "accuracy the mean at training seeds 0 1 2" in tiny
    first_seed = bench("search_efficiency.py", "--table", str(tmp_path / "grid" / "digits_grid.csv"),
                       "--accuracy-floor", "0", "--training-seeds", "0", cwd=tmp_path)
    assert "throughput from digits_grid.works.csv" in first_seed and "seeds.csv" not in first_seed
    two = bench("search_efficiency.py", "--table", str(tmp_path / "grid" / "digits_grid.csv"),
                "--accuracy-floor", "0", "--training-seeds", "0", "2", cwd=tmp_path)
    assert "accuracy the mean at training seeds 0 2 (" in two
    stored = bench("search_efficiency.py", cwd=tmp_path)
    for text in (tiny, stored):
        lines = {line.split("  ")[0].strip(): line for line in text.splitlines() if "trials to target mean" in line}
        assert set(lines) == {"default", "random", "hydra grid order"}, text
        assert all(numbers_after(line, "mean") >= 1 for line in lines.values()), text
        assert "default / random trials to target:" in text
        assert "baseline {'batch_size': 64" in text  # conf/config.yaml's batch size: trial 0 of every replay
    # a grid of 2 configurations: Hydra's order needs 1 or 2 trials, never more
    assert numbers_after(next(l for l in tiny.splitlines() if l.startswith("hydra grid order")), "max") <= 2


def test_grid_by_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grid measured by parts (its models at seeds, its works timed) has no table of cells: the replay composes
    them, each cell's accuracy from its model and its throughput from its work; measuring it cell by cell is
    refused with the commands that measure it."""
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    whole = subprocess.run([sys.executable, str(BENCH / "measure_grid.py"), "--quick", "--grid", "digits_long_grid",
                            "--out", str(tmp_path / "grid")], cwd=tmp_path, env=env, text=True, capture_output=True)
    assert whole.returncode == 2 and "--grid digits_long_grid --seeds 0 1 2" in whole.stderr, whole.stderr
    assert not (tmp_path / "grid" / "digits_long_grid.csv").exists()
    bench("measure_grid.py", "--grid", "digits_long_grid", "--seeds", "0", "1", "--out", str(tmp_path / "grid"),
          cwd=tmp_path)
    missing = subprocess.run([sys.executable, str(BENCH / "search_efficiency.py"), "--quick", "--table",
                              str(tmp_path / "grid" / "digits_long_grid.csv")], cwd=tmp_path, env=env, text=True,
                             capture_output=True)
    assert missing.returncode != 0 and "digits_long_grid.works.csv missing" in missing.stderr, missing.stderr
    bench("measure_grid.py", "--grid", "digits_long_grid", "--works", "--out", str(tmp_path / "grid"), cwd=tmp_path)
    with (tmp_path / "grid" / "digits_long_grid.seeds.csv").open() as f:
        models = list(csv.DictReader(f))
    with (tmp_path / "grid" / "digits_long_grid.works.csv").open() as f:
        works = {r["batch_size"]: float(r["throughput_samples_per_s"]) for r in csv.DictReader(f)}
    accuracy = {(r["batch_size"], r["seed"]): float(r["val_accuracy"]) for r in models}
    assert sorted(accuracy) == [("32", "0"), ("32", "1"), ("64", "0"), ("64", "1")], models

    monkeypatch.syspath_prepend(str(BENCH))
    from search_efficiency import denoised, load_table

    table = load_table(tmp_path / "grid" / "digits_long_grid.csv")
    assert table.meta["by_parts"] and set(table.space) == {"batch_size"}, table.meta
    for batch in ("32", "64"):
        cell = denoised(table).results[(batch,)]["metrics"]
        assert cell["throughput_samples_per_s"] == works[batch]
        assert abs(cell["val_accuracy"] - (accuracy[(batch, "0")] + accuracy[(batch, "1")]) / 2) < 1e-9
    out = bench("search_efficiency.py", "--table", str(tmp_path / "grid" / "digits_long_grid.csv"),
                "--accuracy-floor", "0", cwd=tmp_path)
    assert "accuracy the mean at training seeds 0 1" in out and "throughput from digits_long_grid.works.csv" in out
    assert "default / random trials to target:" in out, out


def test_overhead(tmp_path: Path) -> None:
    """The three runners each run their trial and split wall time into inside and outside; the sweep's wall
    time is compared with the loop's as it is and with the loop's training in place of its own; the trial A/B of
    the sweep's CPU sampler and the child A/B each give their ratio."""
    out = bench("overhead.py", cwd=tmp_path)
    for runner in ("search", "optuna loop", "spawn"):
        line = next(l for l in out.splitlines() if l.startswith(runner))
        wall, inside = numbers_after(line, "wall"), numbers_after(line, "train+eval")
        assert 0 < inside < wall, line
    ratios = next(l for l in out.splitlines() if l.startswith("wall time against the plain loop's"))
    raw, same = ratios.split("search ", 1)[1].split()[:2]  # the raw ratio, then with the loop's training
    assert float(raw.rstrip("x")) > 0 and float(same.rstrip("x")) > 0, ratios
    child = next(l for l in out.splitlines() if l.startswith("trial in the sweep's isolated child"))
    assert float(child.split("median ", 1)[1].split()[0]) > 0, child  # the same trial in the child and here
    ab = next(l for l in out.splitlines() if l.startswith("trial A/B, throughput with each sampler / without:"))
    # each arm of the sampler A/B against the 'off' blocks beside it
    assert numbers_after(ab, ": sampler") > 0 and numbers_after(ab, "(before)") > 0, ab


def test_gp_threads(tmp_path: Path) -> None:
    """One GP ask per arm, torch's default threads and the sweep's one, each with its wall and CPU seconds."""
    out = bench("gp_threads.py", cwd=tmp_path)
    rows = [line for line in out.splitlines() if line.startswith("| 11 |")]
    assert [r.split("|")[2].strip() for r in rows] == ["2", "1 and a constraint"], out
    for row in rows:
        for cell in row.split("|")[4:6]:
            wall, cpu = (float(x) for x in cell.split("/"))
            assert wall > 0 and cpu > 0, row


def test_logging_cost(tmp_path: Path) -> None:
    """Every trial's MLflow run is opened and closed through the timed calls."""
    out = bench("logging_cost.py", cwd=tmp_path)
    calls = {l.split()[0]: int(l.split()[1]) for l in out.splitlines() if l.startswith("tracking.")}
    assert calls["tracking.start_trial"] == calls["tracking.end_trial"] == 2, out
    assert calls["tracking.start_sweep"] == calls["tracking.end_sweep"] == 1, out
    assert "of trial time" in out


def test_repeatability(tmp_path: Path) -> None:
    """Two runs of one configuration, each with a throughput, and their spread."""
    out = bench("repeatability.py", cwd=tmp_path)
    assert "CV across runs" in out and out.count("samples/s") >= 3, out



def test_answer_wall(tmp_path: Path) -> None:
    """Both arms sweep to an answer (the default, and with early stopping and staging off), side by side."""
    out = bench("answer_wall.py", cwd=tmp_path)
    rows = [line for line in out.splitlines() if line.startswith("| 0 |")]
    assert [r.split("|")[2].strip() for r in rows] == ["answer", "no saving"], out
    assert all("your configuration" in r or "x (" in r for r in rows), out  # an answer in each
    assert "Search wall time saved by early stopping, staging and the search's patience:" in out
    assert "the whole sweep's" in out


def test_epoch_restarts(tmp_path: Path) -> None:
    """Each loader arm reports the charged throughput, the rate between epoch ends and a restart's cost."""
    out = bench("epoch_restarts.py", cwd=tmp_path)
    rows = [line for line in out.splitlines() if line.startswith("| ") and "workers" in line]
    assert [r.split("|")[1].strip() for r in rows] == ["no workers", "2 workers", "2 persistent workers"], out
    assert all(r.split("|")[7].strip().endswith("ms") for r in rows), out


def test_seed_noise(tmp_path: Path) -> None:
    """Your configuration and one other trained at two seeds; the table compares them at the same seeds."""
    stored = BENCH / "data" / "seed_noise.csv"
    before = stored.read_text()
    out = bench("seed_noise.py", cwd=tmp_path)
    assert "seed 0 your configuration: val_accuracy" in out and "seed 1 precision=bf16: val_accuracy" in out, out
    row = next(line for line in out.splitlines() if line.startswith("| precision=bf16 |"))
    assert row.count("|") == 12 and " of 2 |" in row and " of 1 |" in row, row  # floor at 2 seeds, check on 1 pair
    assert stored.read_text() == before, "--quick must leave the stored raw values alone"

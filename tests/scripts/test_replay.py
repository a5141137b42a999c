"""The benchmark replay drives the sweep's own engine (scripts/bench/replay.py, search/sweep/build.py), and the
landscape library it is judged on is what its generator writes (scripts/bench/landscapes.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, pythonpath

BENCH = REPO / "scripts" / "bench"
LIBRARY = BENCH / "data" / "landscapes"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import grids
    import replay

    return grids, replay


def test_the_replay_builds_the_sweeps_policies_from_the_sweeps_settings(bench) -> None:
    """Same settings, same policies, in the same order: the replay has no search of its own to drift."""
    grids, replay = bench
    from hydra_plugins.search_sweeper.search_sweeper import SearchSweeperConf
    from search.sweep import build
    from search.sweep.space import Space, build_space
    from search.sweep.study import make_sampler

    table = grids.read_grid(LIBRARY / "oom_wall.csv", True, None)
    search = replay._Search(table, replay.STRATEGIES["default"], 0, 20)
    settings = replay.settings_of(replay.STRATEGIES["default"], 0, 20)
    conf = SearchSweeperConf()
    assert (settings.patience_trials, settings.start_design, settings.baseline_repeats, settings.staging) == (
        conf.patience_trials, conf.start_design, conf.baseline_repeats, conf.staging)  # the sweep's defaults
    space = Space(build_space(table.space, []).distributions, [])
    base = make_sampler(replay.default_sampler_node(), 0, space.distributions)
    sweeps = build.policies(settings, space, base, True, True, "staged", (grids.baseline_of(table), 0),
                            replay.facts_of(table))
    assert [type(p).__name__ for p in search.policies] == [type(p).__name__ for p in sweeps] == [
        "YourConfiguration", "Recipe", "StartDesign", "Staging", "EarlyStopping", "Patience"]


def test_a_replay_reaches_the_target_and_its_seeds_explore_apart(bench) -> None:
    """On an out-of-memory wall (the best batch fits only in half precision), every seed reaches the target within
    one default sweep, and the seeds do not all take one path."""
    grids, replay = bench
    table = grids.read_grid(LIBRARY / "oom_wall.csv", True, None)
    floor = grids.floor_of(table, grids.baseline_of(table), None)
    target = grids.target_of(table, floor)
    runs = [replay.replay(table, "default", seed, floor, target, 20, 40) for seed in range(3)]
    assert all(r["in_sweep"] for r in runs), [r["trials_to_target"] for r in runs]
    assert len({r["path"] for r in runs}) > 1


def test_the_landscape_library_is_what_its_generator_writes() -> None:
    result = subprocess.run([sys.executable, str(BENCH / "landscapes.py"), "--check"], capture_output=True,
                            text=True, env={"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    names = {p.stem for p in LIBRARY.glob("*.csv")}
    assert len(names) >= 8 and {p.stem for p in LIBRARY.glob("*.json")} == names

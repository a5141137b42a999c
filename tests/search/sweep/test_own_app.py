"""A user's own Hydra app, written for hydra-optuna-sweeper, swept after
changing only the sweeper's name (README, "Migrating from
hydra-optuna-sweeper"). The app and its config live in a temporary
directory, outside this repository, as a user's would; the task returns
plain numbers, which become named metrics: in the study, in MLflow and in
the final table."""
from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import pythonpath
from sweep_results import load_study, runs

pytestmark = pytest.mark.slow

APP = '''
import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path="conf", config_name="config")
def sphere(cfg: DictConfig):
    value = float(cfg.x) ** 2 + float(cfg.y) ** 2 + float(cfg.z)
    return (value, float(cfg.y)) if cfg.two_values else value


if __name__ == "__main__":
    sphere()
'''

# The old plugin's documented example, with `hydra/sweeper: optuna` renamed: nothing else changed.
OLD_PLUGIN_CONFIG = '''
defaults:
  - override hydra/sweeper: search

hydra:
  sweeper:
    sampler:
      seed: 123
    direction: minimize
    study_name: sphere
    storage: null
    n_trials: 3
    n_jobs: 1
    params:
      x: range(-5.5, 5.5, step=0.5)
      y: choice(-5, 0, 5)
      z: interval(0, 1)

x: 1
y: 1
z: 0
two_values: false
'''


def write_app(tmp: Path, config: str) -> None:
    (tmp / "conf").mkdir()
    (tmp / "app.py").write_text(textwrap.dedent(APP))
    (tmp / "conf" / "config.yaml").write_text(textwrap.dedent(config))


def sweep(tmp: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": pythonpath(), "COLUMNS": "200"}  # the sweeper plugin, installed
    return subprocess.run([sys.executable, "app.py", "--multirun", *overrides], check=False, cwd=tmp, env=env,
                          text=True, capture_output=True, timeout=600)


CASES = {
    # the config: one value, minimized, named `value`
    "old plugin config": (OLD_PLUGIN_CONFIG, [], ["value"], ["minimize"]),
    # no direction: minimized, the old plugin's default; the value named on the command line
    "no direction, metric named": (OLD_PLUGIN_CONFIG.replace("    direction: minimize\n", ""),
                                   ["hydra.sweeper.metrics=[loss]"], ["loss"], ["minimize"]),
    # two directions, the task returns two numbers: value_0, value_1
    "two values": (OLD_PLUGIN_CONFIG, ["hydra.sweeper.direction=[minimize,maximize]", "two_values=true"],
                   ["value_0", "value_1"], ["minimize", "maximize"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_old_plugin_app_sweeps_and_its_values_reach_mlflow(workdir: Path, case: str) -> None:
    config, overrides, names, directions = CASES[case]
    assert "direction" not in config or case != "no direction, metric named"
    write_app(workdir, config)
    result = sweep(workdir, *overrides)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    study = load_study(workdir, "sphere")  # storage: null is ./optuna.journal here, not an in-memory study
    assert "storage: null keeps the study in ./optuna.journal" in result.stdout
    assert [d.name.lower() for d in study.directions] == directions
    trials = [t for t in study.trials if t.user_attrs.get("outcome") != "skipped"]
    assert len(trials) == 3 and all(t.user_attrs["outcome"] == "ok" for t in trials)
    for t in trials:
        value = t.params["x"] ** 2 + t.params["y"] ** 2 + t.params["z"]
        assert math.isclose(t.values[0], value)
        assert t.user_attrs["metrics"] == dict(zip(names, t.values))
    assert -5.5 <= min(t.params["x"] for t in trials) and 0 <= min(t.params["z"] for t in trials) <= 1

    trial_runs = runs(workdir, "trial")
    assert {r.data.tags["search.study_name"] for r in trial_runs} == {"sphere"}
    by_number = {int(r.data.tags["search.trial_number"]): r for r in trial_runs}
    for t in trials:
        assert by_number[t.number].data.metrics == dict(zip(names, t.values))
    assert runs(workdir, "sweep")[0].data.params["metrics"] == ",".join(names)
    header = next(line for line in result.stdout.splitlines() if "┃ trial" in line)  # the final table's
    assert all(name in header for name in names), header


def test_a_task_returning_a_dict_must_name_its_metrics(workdir: Path) -> None:
    write_app(workdir, OLD_PLUGIN_CONFIG.replace("n_trials: 3", "n_trials: 2"))
    (workdir / "app.py").write_text(textwrap.dedent(APP).replace(
        "return (value, float(cfg.y)) if cfg.two_values else value", 'return {"loss": value}'))
    result = sweep(workdir)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert "its first trial reported loss, not value" in result.stderr
    assert "hydra.sweeper.metrics" in result.stderr
    assert "also a new hydra.sweeper.study_name (study 'sphere' now holds this trial" in " ".join(result.stderr.split())

    named = sweep(workdir, "hydra.sweeper.metrics=[loss]", "hydra.sweeper.study_name=named")
    assert named.returncode == 0, named.stdout[-3000:] + named.stderr[-3000:]
    assert "MLflow, side by side (the front): " in named.stdout  # no answer and no baseline to name
    assert all(t.user_attrs["metrics"] == {"loss": t.value} for t in load_study(workdir, "named").trials)


def test_export_of_an_own_app_study_reproduces_it_with_that_app(workdir: Path) -> None:
    """`export` prints the user's app with the overrides, not this package's `python -m search run`."""
    write_app(workdir, OLD_PLUGIN_CONFIG.replace("n_trials: 3", "n_trials: 2"))
    result = sweep(workdir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    exported = subprocess.run([sys.executable, "-m", "search", "export", "--out", "best.yaml"], cwd=workdir,
                              env=env, text=True, capture_output=True, timeout=120)
    assert exported.returncode == 0, exported.stdout[-3000:] + exported.stderr[-3000:]
    [command] = [line for line in exported.stdout.splitlines() if line.startswith("python ")]
    assert command.startswith("python app.py x=") and "search run" not in exported.stdout
    assert "Reproduce: python app.py <the overrides below>" in (workdir / "best.yaml").read_text()
    rerun = subprocess.run(shlex.split(command), cwd=workdir, env=env, text=True, capture_output=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-3000:]  # the app takes the overrides as they are

"""A user's own objectives, in a project outside this repository: each has its
own study and MLflow experiment (named after the objective), and the
configuration `export` writes runs again with `python -m search run --from`,
from another directory, even for an objective found on `hydra.searchpath`."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import REPO, pythonpath, run_search
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from sweep_results import load_study

from search.tracking.mlflow_runs import flatten

pytestmark = pytest.mark.slow

MODULE = '''
import torch
from torch import nn
from torch.utils.data import Dataset


class Blobs(Dataset):
    def __init__(self, size, seed, dim=16):
        g = torch.Generator().manual_seed(seed)
        centers = torch.randn(4, dim, generator=torch.Generator().manual_seed(0)) * 3
        self.y = torch.arange(size) % 4
        self.x = centers[self.y] + torch.randn(size, dim, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Mlp(nn.Module):
    def __init__(self, dim=16, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 4)

    def forward(self, x):
        return self.head(self.body(x))


def objective(cfg):
    return {"throughput_samples_per_s": 1000.0 / cfg["batch_size"], "val_accuracy": 0.9}
'''

MLP = '''
name: custom
model: {_target_: myproj.blobs.Mlp, hidden: 32}
train_dataset: {_target_: myproj.blobs.Blobs, size: 512, seed: 1}
val_dataset: {_target_: myproj.blobs.Blobs, size: 256, seed: 2}
'''

SMALL = ("hydra.sweeper.n_trials=2", "hydra.sweeper.params=null", "batch_size=choice(32,64)",
         "train.budget_samples=256")


def test_own_objectives_get_own_studies_and_the_export_runs_again(workdir: Path) -> None:
    (workdir / "myproj" / "conf" / "objective").mkdir(parents=True)
    (workdir / "myproj" / "__init__.py").write_text("")
    (workdir / "myproj" / "blobs.py").write_text(textwrap.dedent(MODULE))
    (workdir / "myproj" / "conf" / "objective" / "mlp.yaml").write_text(textwrap.dedent(MLP))
    env = {"PYTHONPATH": pythonpath(workdir, REPO)}

    from_file = run_search("multirun", "objective=mlp", "hydra.searchpath=[file://myproj/conf]", *SMALL,
                           cwd=workdir, env=env)
    assert from_file.returncode == 0, from_file.stdout[-3000:] + from_file.stderr[-3000:]
    named = run_search("multirun", "objective=custom", "objective.name=blobs",
                       "objective.callable=myproj.blobs:objective", *SMALL, cwd=workdir, env=env)
    assert named.returncode == 0, named.stdout[-3000:] + named.stderr[-3000:]

    # name: custom is named after its model's _target_; a name of the user's is its own
    storage = JournalStorage(JournalFileBackend(str(workdir / "optuna.journal")))
    assert sorted(s.study_name for s in storage.get_all_studies()) == ["blobs", "myproj.blobs.Mlp"]
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    for study_name in ("blobs", "myproj.blobs.Mlp"):
        experiment = client.get_experiment_by_name(study_name)
        trial_runs = client.search_runs([experiment.experiment_id], "tags.`search.role` = 'trial'")
        assert {r.data.tags["search.study_name"] for r in trial_runs} == {study_name}
    assert client.get_experiment_by_name("custom") is None

    exported = run_search("export", "--study-name", "myproj.blobs.Mlp", "--out", "best.yaml", cwd=workdir, env=env)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "python -m search run --from best.yaml" in exported.stdout
    best = yaml.safe_load((workdir / "best.yaml").read_text())
    assert "objective=mlp" in best["overrides"]
    assert f"hydra.searchpath=[file://{workdir}/myproj/conf]" in best["overrides"]

    elsewhere = workdir / "elsewhere"  # the search path was made absolute: any directory runs it
    elsewhere.mkdir()
    rerun = run_search("run", "--from", str(workdir / "best.yaml"), "hydra.run.dir=rerun", cwd=elsewhere, env=env)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    composed = flatten(OmegaConf.to_container(OmegaConf.load(elsewhere / "rerun" / ".hydra" / "config.yaml"),
                                              resolve=True))
    trial = load_study(workdir, "myproj.blobs.Mlp").trials[best["trials"][-1]]
    assert {k: str(v) for k, v in composed.items()} == client.get_run(trial.user_attrs["mlflow_run_id"]).data.params

    wins = run_search("run", "--from", str(workdir / "best.yaml"), "batch_size=16", "hydra.run.dir=rerun16",
                      cwd=elsewhere, env=env)  # the command line wins over the file
    assert wins.returncode == 0, wins.stdout[-3000:] + wins.stderr[-3000:]
    assert OmegaConf.load(elsewhere / "rerun16" / ".hydra" / "config.yaml").batch_size == 16


def test_run_from_a_file_that_export_did_not_write_is_one_line(workdir: Path) -> None:
    (workdir / "notes.yaml").write_text("just: text\n")
    result = run_search("run", "--from", "notes.yaml", cwd=workdir)
    assert result.returncode == 2 and "--from must name a file with a list of overrides" in result.stderr
    missing = run_search("run", "--from", "nosuch.yaml", cwd=workdir)
    assert missing.returncode == 2 and "--from must name a file written by python -m search export" in missing.stderr


def test_a_run_whose_trial_does_not_end_ok_exits_6_with_the_reason(workdir: Path) -> None:
    """`python -m search run` in a script (three re-measurements of an exported answer, say): a trial that
    ended infeasible, failed or timed out must not read as success."""
    result = run_search("run", "trial.timeout_s=0.5", "train.budget_samples=256", cwd=workdir)
    assert result.returncode == 6, result.stdout[-2000:] + result.stderr[-2000:]
    assert "trial outcome: timeout" in result.stdout
    line = result.stderr.strip().splitlines()[-1]
    assert line == "search: the trial ended timeout, not ok: ran past trial.timeout_s=0.5"


def test_a_run_that_breaks_a_knob_rule_is_bad_input_before_anything_runs(workdir: Path) -> None:
    """The rules a sweep applies to its fixed settings hold for `run` too: one line, exit 2, no run directory."""
    for overrides, start in ((["parallel.compile=default", "train.warmup_steps=0"],  # a rule on any machine
                              "train.warmup_steps must be >= 1 with parallel.compile=default"),
                             (["batch_size=-3"], "batch_size must be an int >= 1; got -3")):
        result = run_search("run", *overrides, "hydra.run.dir=refused", cwd=workdir)
        assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
        assert result.stderr.strip().splitlines() == [result.stderr.strip()]
        assert result.stderr.startswith(f"search: error: {start}"), result.stderr
        assert not (workdir / "refused").exists()

"""The other workloads through `python -m search multirun`: gpt (tiny),
resnet (throughput only, single objective) and the user's own objective
configured only through `_target_` from a module outside this repository."""
from __future__ import annotations

import textwrap
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from conftest import REPO, pythonpath, run_search
from sweep_results import runs

pytestmark = pytest.mark.slow

FAST = ["hydra.sweeper.n_trials=2", "hydra.sweeper.params=null", "parallel.devices=1", "parallel.threads=1",
        "hydra/sweeper/sampler=grid"]


def study(workdir: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=JournalStorage(JournalFileBackend(str(workdir / "optuna.journal"))))


def test_gpt_tiny_sweeps_and_logs_tokens_per_second(workdir: Path) -> None:
    result = run_search("multirun", "objective=gpt", *FAST, "precision=choice(fp32,bf16)",
                        "train.budget_samples=640", "train.eval_batch_size=32", cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    trials = study(workdir, "gpt").trials
    assert [t.user_attrs["outcome"] for t in trials] == ["ok", "ok"]
    for run in runs(workdir, "trial"):
        m = run.data.metrics
        assert m["throughput_tokens_per_s"] == pytest.approx(m["throughput_samples_per_s"] * 64)
        assert 0 <= m["val_accuracy"] <= 1 and m["val_loss"] > 0
        assert run.data.params["objective.name"] == "gpt" and run.data.params["optim.lr"] == "0.002"


def test_resnet_is_single_objective_and_invents_no_accuracy(workdir: Path) -> None:
    result = run_search("multirun", "objective=resnet", *FAST, "model_pruning.ratio=choice(0.0,0.5)",
                        "train.budget_samples=192", "batch_size=32", cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "measures no accuracy: single-metric sweep on throughput_samples_per_s" in result.stdout
    s = study(workdir, "resnet")
    assert len(s.directions) == 1
    assert [t.user_attrs["outcome"] for t in s.trials] == ["ok", "ok"]
    for run in runs(workdir, "trial"):
        assert "val_accuracy" not in run.data.metrics and "val_loss" not in run.data.metrics
        assert run.data.metrics["throughput_samples_per_s"] > 0
    by_ratio = {t.params["model_pruning.ratio"]: t.user_attrs["metrics"]["params_count"] for t in s.trials}
    assert by_ratio[0.5] < 0.6 * by_ratio[0.0]


USER_MODULE = '''
import torch
from torch import nn


class Blobs(torch.utils.data.Dataset):
    """Two Gaussian blobs in 16 dimensions, made from a seed."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, 2, (n,), generator=g)
        self.x = torch.randn(n, 16, generator=g) + 2.0 * self.y[:, None]

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.head(self.body(x))
'''


def test_users_own_objective_from_outside_the_repo_through_target_only(workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "user_code"
    outside.mkdir()
    (outside / "user_objective.py").write_text(textwrap.dedent(USER_MODULE))
    result = run_search(
        "multirun", "objective=custom", *FAST, "model_pruning.ratio=choice(0.0,0.5)", "loader.num_workers=1",
        "objective.model={_target_: user_objective.Mlp, hidden: 64}",
        "objective.train_dataset={_target_: user_objective.Blobs, n: 512, seed: 0}",
        "objective.val_dataset={_target_: user_objective.Blobs, n: 256, seed: 1}",
        "train.budget_samples=1024", cwd=workdir, env={"PYTHONPATH": pythonpath(REPO, outside)})
    assert result.returncode == 0, result.stderr[-3000:]
    trials = study(workdir, "user_objective.Mlp").trials  # named after the model's _target_
    assert [t.user_attrs["outcome"] for t in trials] == ["ok", "ok"]
    metrics = {t.params["model_pruning.ratio"]: t.user_attrs["metrics"] for t in trials}
    assert metrics[0.5]["params_count"] < 0.7 * metrics[0.0]["params_count"]  # model pruning applied
    assert all(m["loader_worker_processes"] >= 1 for m in metrics.values())  # loader knob applied
    assert all(m["val_accuracy"] > 0.8 for m in metrics.values())  # it learned the blobs

"""A custom objective's model and data that every trial would fail on are refused before the sweep creates
anything: one line, exit 2, no study, no MLflow run, no multirun/ (objectives/custom_check.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_fork import ForkedCli, shared
from conftest import REPO, TESTS, pythonpath
from sweep_results import assert_one_line_and_nothing_created

pytestmark = pytest.mark.slow

M = "misfit_objective"


@pytest.fixture(scope="module")
def cli() -> ForkedCli:
    """The CLI imported once, each run a fresh fork of it (tests/cli_fork.py)."""
    return shared()


ENV = {"PYTHONPATH": pythonpath(REPO, TESTS)}  # tests/misfit_objective.py


@pytest.mark.parametrize("overrides, words", [
    ([f"objective.model={{_target_: {M}.Net, hiden: 8}}"],
     "objective.model must build from its arguments; got TypeError: Net.__init__() got an unexpected keyword "
     "argument 'hiden'"),
    ([f"objective.model={{_target_: {M}.NotAModule}}"], "objective.model must build a torch.nn.Module"),
    ([f"objective.train_dataset={{_target_: {M}.DictBlobs}}"],
     "objective.train_dataset items must be (input, target) pairs; got a dict"),
    ([f"objective.train_dataset={{_target_: {M}.StreamBlobs}}"], "objective.train_dataset must be a map-style"),
    ([f"objective.model={{_target_: {M}.Net, outputs: 1}}", "objective.loss={_target_: torch.nn.MSELoss}",
      f"objective.val_dataset={{_target_: {M}.Blobs, target: value}}"],
     "hydra.sweeper.metrics names val_accuracy, which needs class targets"),
], ids=["misspelt-kwarg", "not-a-module", "dict-items", "iterable", "regression-val-accuracy"])
def test_a_misfit_model_or_dataset_is_refused_before_anything_exists(cli: ForkedCli, workdir: Path,
                                                                    overrides: list[str], words: str) -> None:
    """Seen in a user's first sweeps: every trial crashed (exit 3) or ended infeasible (exit 0, no answer), with
    optuna.journal, mlflow.db and multirun/ left behind."""
    base = ["objective=custom", f"objective.model={{_target_: {M}.Net}}",
            f"objective.train_dataset={{_target_: {M}.Blobs}}", f"objective.val_dataset={{_target_: {M}.Blobs}}"]
    given = {o.split("=", 1)[0] for o in overrides}
    args = [o for o in base if o.split("=", 1)[0] not in given] + overrides
    for command in ("multirun",) if "val_accuracy" in words else ("multirun", "run"):  # run scores nothing
        assert_one_line_and_nothing_created(workdir, cli.run(command, *args, cwd=workdir, env=ENV), words)

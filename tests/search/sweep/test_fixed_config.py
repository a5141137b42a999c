"""A resumed study keeps the fixed configuration it was made with (search/sweep/fixed_config.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import create_trial

from conftest import TESTS, pythonpath, run_search
from search.errors import BadInput
from search.record import FIXED_ATTR
from search.sweep.fixed_config import changes, check_fixed, fixed_record, source_digest
from sweep_results import load_study, runs

PACED = ["objective=custom", "objective.callable=paced_objective:objective", "hydra.sweeper.params=null",
         "batch_size=choice(32,64,128,256)", "hydra.sweeper.seed=0", "hydra.sweeper.study_name=paced",
         "hydra.sweeper.n_trials=2"]


ENV = {"PYTHONPATH": pythonpath(TESTS.parent, TESTS)}


def _sweep_dirs(workdir: Path) -> list[Path]:
    return sorted(workdir.glob("multirun/*/*"))


@pytest.mark.slow
def test_a_changed_fixed_setting_is_refused_leaving_nothing_and_the_same_one_resumes(workdir: Path) -> None:
    first = run_search("multirun", *PACED, "train.budget_samples=300", cwd=workdir, env=ENV)
    assert first.returncode == 0, first.stderr[-3000:]
    assert len(load_study(workdir, "paced").trials) == 2
    sweeps, trials, dirs = len(runs(workdir, "sweep")), len(runs(workdir, "trial")), _sweep_dirs(workdir)

    changed = run_search("multirun", *PACED, "train.budget_samples=400", cwd=workdir, env=ENV)
    assert changed.returncode == 2, changed.stdout[-2000:] + changed.stderr[-2000:]
    [line] = [ln for ln in changed.stderr.splitlines() if ln.strip()]
    print(line)
    assert "train.budget_samples 300 -> 400" in line and "hydra.sweeper.study_name=<new name>" in line, line
    assert "choice(" not in line  # the budget is the same for every trial: not offered as a knob to search
    assert "resuming" not in changed.stdout
    assert len(load_study(workdir, "paced").trials) == 2  # nothing enqueued, nothing run
    assert (len(runs(workdir, "sweep")), len(runs(workdir, "trial"))) == (sweeps, trials)
    assert _sweep_dirs(workdir) == dirs

    same = run_search("multirun", *PACED, "train.budget_samples=300", cwd=workdir, env=ENV)
    assert same.returncode == 0, same.stderr[-3000:]
    assert "study 'paced' resuming (2 trials so far)" in same.stdout
    assert len(load_study(workdir, "paced").trials) == 4


@pytest.mark.slow
def test_a_study_made_before_the_record_resumes_and_gets_it(workdir: Path) -> None:
    storage = JournalStorage(JournalFileBackend(str(workdir / "optuna.journal")))
    old = optuna.create_study(study_name="paced", storage=storage, directions=["maximize", "maximize"])
    old.add_trial(create_trial(params={"batch_size": 64},
                               distributions={"batch_size": CategoricalDistribution([32, 64, 128, 256])},
                               values=[1000.0, 0.9], user_attrs={"outcome": "ok"}))
    assert FIXED_ATTR not in old.user_attrs

    resumed = run_search("multirun", *PACED, "train.budget_samples=300", cwd=workdir, env=ENV)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "study 'paced' resuming (1 trials so far)" in resumed.stdout
    assert "no record of the configuration it was made with (made by an older version): recorded now" in resumed.stdout
    study = load_study(workdir, "paced")
    assert study.user_attrs[FIXED_ATTR]["train.budget_samples"] == "300"

    changed = run_search("multirun", *PACED, "train.budget_samples=400", cwd=workdir, env=ENV)
    assert changed.returncode == 2 and "train.budget_samples 300 -> 400" in changed.stderr


def test_the_record_leaves_out_the_per_trial_settings_and_how_a_trial_runs() -> None:
    config = {"batch_size": 64, "train": {"budget_samples": 300, "seed": 0, "throughput_only": False,
                                          "stop_below_samples_per_s": None},
              "trial": {"timeout_s": 600, "optuna_study": None}, "objective": {"width": 32, "channels": [16, 32]},
              "hydra": {"job": {"name": "x"}}}
    record = fixed_record(config)
    assert record == {"batch_size": "64", "train.budget_samples": "300", "train.seed": "0", "objective.width": "32",
                      "objective.channels": "[16, 32]"}
    assert changes(record, fixed_record({**config, "objective": {"width": 8, "channels": [16, 32]}})) == [
        "objective.width 32 -> 8"]
    assert fixed_record({**config, "trial": {"timeout_s": 5}}) == record
    url = fixed_record({"objective": {"train_dataset": {"url": "postgresql://me:s3cret@db/data"}}})
    assert "s3cret" not in str(url), url


def test_a_user_models_source_file_is_part_of_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "fixed_config_model.py"
    module.write_text("class Net:\n    width = 32\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = {"objective": {"model": {"_target_": "fixed_config_model.Net"}, "loss": {"_target_": "torch.nn.MSELoss"}}}
    before = fixed_record(config)
    assert before["objective.model._target_:source"].startswith("sha256:")
    assert "objective.loss._target_:source" not in before  # an installed package's: its version is the fingerprint's
    module.write_text("class Net:\n    width = 8\n")
    assert changes(before, fixed_record(config)) == ["objective.model._target_'s source file changed"]
    assert source_digest("no_such_module_here.Net") is None
    sys.modules.pop("fixed_config_model", None)


def test_the_refusal_names_the_keys_and_offers_to_search_a_changed_model_setting(workdir: Path) -> None:
    study = optuna.create_study(study_name="mine", storage=JournalStorage(JournalFileBackend(
        str(workdir / "optuna.journal"))))
    record = fixed_record({"objective": {"model": {"width": 32, "blocks": 2}}, "train": {"budget_samples": 300}})
    assert check_fixed(study, record, resumed=False) is None and study.user_attrs[FIXED_ATTR] == record
    assert check_fixed(study, record, resumed=True) is None
    with pytest.raises(BadInput) as refused:
        check_fixed(study, fixed_record({"objective": {"model": {"width": 8, "blocks": 1}},
                                         "train": {"budget_samples": 300}}), resumed=True)
    line = str(refused.value)
    assert "\n" not in line and "study 'mine' got objective.model.blocks 2 -> 1; objective.model.width 32 -> 8;" in line
    assert "fix: the old value (to compare the two, keep the old one and search both: " \
           "objective.model.blocks=choice(2,1)), or a new study: hydra.sweeper.study_name=<new name>" in line
    assert study.user_attrs[FIXED_ATTR] == record  # the refusal wrote nothing


def test_a_value_from_an_environment_variable_is_checked_by_a_digest(workdir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    storage = JournalStorage(JournalFileBackend(str(workdir / "optuna.journal")))
    study = optuna.create_study(study_name="mine", storage=storage)
    config = {"objective": {"data_dir": "${oc.env:SEARCH_TEST_DATA_DIR}"}, "train": {"budget_samples": 300}}
    monkeypatch.setenv("SEARCH_TEST_DATA_DIR", "/data/digits-v1-s3cret")
    assert check_fixed(study, fixed_record(config), resumed=False) is None
    stored = study.user_attrs[FIXED_ATTR]
    assert stored["objective.data_dir"] == '"${oc.env:SEARCH_TEST_DATA_DIR}"'  # as written
    assert stored["objective.data_dir:env"].startswith("hmac-sha256:")
    assert "s3cret" not in str(stored) and "digits-v1" not in str(stored)  # the value itself is never stored
    assert check_fixed(study, fixed_record(config), resumed=True) is None  # the same value resumes

    monkeypatch.setenv("SEARCH_TEST_DATA_DIR", "/data/digits-v2")
    with pytest.raises(BadInput) as refused:
        check_fixed(study, fixed_record(config), resumed=True)
    line = str(refused.value)
    assert "\n" not in line and "digits-v2" not in line, line
    assert ("study 'mine' got objective.data_dir \"${oc.env:SEARCH_TEST_DATA_DIR}\" resolves to another value than "
            "when the study was made (an environment variable changed); fix: the old value (an environment variable "
            "as it was when the study was made), or a new study") in line, line
    assert study.user_attrs[FIXED_ATTR] == stored  # the refusal wrote nothing

    other = optuna.create_study(study_name="other", storage=storage)  # another study draws its own key
    check_fixed(other, fixed_record(config), resumed=False)
    assert other.user_attrs[FIXED_ATTR]["objective.data_dir:env"] != stored["objective.data_dir:env"]


def test_a_record_made_before_environment_values_were_recorded_resumes_and_gets_them(
        workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study = optuna.create_study(study_name="old", storage=JournalStorage(JournalFileBackend(
        str(workdir / "optuna.journal"))))
    config = {"train": {"budget_samples": "${oc.env:SEARCH_TEST_BUDGET,300}"}}
    monkeypatch.delenv("SEARCH_TEST_BUDGET", raising=False)
    older = {k: v for k, v in fixed_record(config).items() if not k.endswith(":env")}
    study.set_user_attr(FIXED_ATTR, older)
    assert check_fixed(study, fixed_record(config), resumed=True) is None
    assert "train.budget_samples:env" in study.user_attrs[FIXED_ATTR]  # checked from now on
    monkeypatch.setenv("SEARCH_TEST_BUDGET", "400")
    with pytest.raises(BadInput, match="train.budget_samples .* resolves to another value"):
        check_fixed(study, fixed_record(config), resumed=True)


@pytest.mark.slow
def test_a_sweep_resumed_under_another_environment_value_is_refused(workdir: Path) -> None:
    name = "objective.name=${oc.env:SEARCH_TEST_MODEL}"
    first = run_search("multirun", *PACED, name, cwd=workdir, env={**ENV, "SEARCH_TEST_MODEL": "net-v1"})
    assert first.returncode == 0, first.stderr[-3000:]
    changed = run_search("multirun", *PACED, name, cwd=workdir, env={**ENV, "SEARCH_TEST_MODEL": "net-v2"})
    assert changed.returncode == 2, changed.stdout[-2000:] + changed.stderr[-2000:]
    assert "objective.name \"${oc.env:SEARCH_TEST_MODEL}\" resolves to another value" in changed.stderr, changed.stderr
    assert len(load_study(workdir, "paced").trials) == 2  # nothing enqueued, nothing run
    same = run_search("multirun", *PACED, name, cwd=workdir, env={**ENV, "SEARCH_TEST_MODEL": "net-v1"})
    assert same.returncode == 0, same.stderr[-3000:]
    assert len(load_study(workdir, "paced").trials) == 4

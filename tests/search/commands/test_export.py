"""A user's own objectives, in a project outside this repository: each has its
own study and MLflow experiment (named after the objective), and the
configuration `export` writes runs again with `python -m search run --from`,
from another directory, even for an objective found on `hydra.searchpath`."""
from __future__ import annotations

import textwrap
from pathlib import Path

import optuna
import pytest
import yaml
from conftest import REPO, pythonpath, run_search
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from sweep_results import load_study

from search.commands.export import main as export_main
from search.record import ACCURACY, ANSWER_ATTR, ROLE_ATTR, ROUND_ATTR, SEED_ATTR, THROUGHPUT, TOLERANCE_ATTR, Answer
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


def _study_with_baseline(path: Path) -> optuna.Study:
    """A study as a sweep with a baseline writes it: your configuration's two runs (the second at the next seed),
    then search trials."""
    storage = JournalStorage(JournalFileBackend(str(path)))
    study = optuna.create_study(study_name="digits", storage=storage, directions=["maximize", "maximize"])
    study.set_metric_names([THROUGHPUT, ACCURACY])
    _add(study, 32, 1000.0, 0.9359, {ROLE_ATTR: "baseline"})
    _add(study, 32, 990.0, 0.9340, {ROLE_ATTR: "baseline", SEED_ATTR: 1})
    return study


def _add(study: optuna.Study, batch_size: int, throughput: float, accuracy: float, attrs: dict | None = None,
         outcome: str = "ok") -> int:
    study.add_trial(optuna.trial.create_trial(
        params={"batch_size": batch_size}, distributions={"batch_size": CategoricalDistribution([32, 64, 128, 256])},
        values=[throughput, accuracy],
        user_attrs={"outcome": outcome, "metrics": {THROUGHPUT: throughput, ACCURACY: accuracy},
                    "overrides": [f"batch_size={batch_size}"], **(attrs or {})}))
    return len(study.trials) - 1


def test_export_without_an_answer_keeps_the_sweeps_accuracy_floor_and_says_there_is_no_answer(tmp_path, capsys,
                                                                                                monkeypatch):
    # was: a sweep stopped in its second-seed check, then `export` wrote the fastest trial, its val_accuracy
    # 0.9304 below the floor 0.9309 (0.9359 - 0.005), as "maximize throughput_samples_per_s", with no word
    study = _study_with_baseline(tmp_path / "optuna.journal")
    _add(study, 256, 3000.0, 0.9304)  # the fastest, below the floor
    above = _add(study, 64, 2000.0, 0.9320)
    _add(study, 128, 2500.0, 0.9400, {ROLE_ATTR: "seed_check", SEED_ATTR: 1})  # another seed: not a candidate
    monkeypatch.chdir(tmp_path)
    assert export_main(["--out", "best.yaml"]) == 0
    out = capsys.readouterr().out
    best = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert best["trials"] == [above] and best["overrides"] == ["batch_size=64"]
    assert best["rule"].startswith("not confirmed: the search's fastest at the sweep's floor val_accuracy >= 0.9309")
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {best['note']}"]
    assert "study 'digits' has no confirmed answer (its sweep did not finish its confirmation" in notes[0]
    assert notes[0].endswith("fix: run the sweep again to confirm (python -m search multirun with the same "
                             "overrides resumes the study)")
    # a rule of the user's own is theirs: no floor added
    assert export_main(["--out", "rule.yaml", "--best", THROUGHPUT]) == 0
    assert yaml.safe_load((tmp_path / "rule.yaml").read_text())["trials"] == [2]
    # the sweep's own tolerance, as it recorded it (was: the default's, whatever the sweep searched at)
    study.set_user_attr(TOLERANCE_ATTR, 0.01)
    assert export_main(["--out", "wider.yaml"]) == 0
    wider = yaml.safe_load((tmp_path / "wider.yaml").read_text())
    assert wider["trials"] == [2] and wider["rule"].startswith(
        "not confirmed: the search's fastest at the sweep's floor val_accuracy >= 0.9259 (your configuration's "
        "0.9359 minus the sweep's hydra.sweeper.accuracy_tolerance 0.01)"), wider["rule"]


def test_export_of_an_answer_with_later_trials_says_they_were_not_confirmed(tmp_path, capsys, monkeypatch):
    # was: a resumed sweep found 3,612 samples/s and was stopped in its confirmation's round 2; export wrote the
    # earlier sweep's answer (1.16x) with no word of the trials after it
    study = _study_with_baseline(tmp_path / "optuna.journal")
    answer_runs = [_add(study, 64, 1150.0, 0.9350)]
    for round_number in (1, 2):
        _add(study, 32, 1000.0, 0.9359, {ROLE_ATTR: "confirm", ROUND_ATTR: round_number})
        answer_runs.append(_add(study, 64, 1160.0, 0.9350, {ROLE_ATTR: "confirm", ROUND_ATTR: round_number}))
    _add(study, 64, 1150.0, 0.9330, {ROLE_ATTR: "seed_check", SEED_ATTR: 1})
    _add(study, 32, 990.0, 0.9340, {ROLE_ATTR: "seed_check", SEED_ATTR: 1})
    answer = Answer({"batch_size": 64}, ["batch_size=64"], False, 1.16, 1.05, 1.28, 2, 0.9350, 0.9359, 0.005,
                    trials=answer_runs, baseline_trials=[0, 1], confirm_rounds=2)
    study.set_user_attr(ANSWER_ATTR, answer.to_dict())
    monkeypatch.chdir(tmp_path)

    assert export_main(["--out", "best.yaml"]) == 0  # nothing after the confirmation: no note
    assert "note:" not in capsys.readouterr().out
    assert "later_trials" not in yaml.safe_load((tmp_path / "best.yaml").read_text())

    later = [_add(study, 128, 3612.0, 0.9360), _add(study, 256, 3000.0, 0.9300)]  # the next sweep's search
    _add(study, 256, 100.0, 0.5, outcome="failed")  # not ok: not counted
    _add(study, 32, 1000.0, 0.9359, {ROLE_ATTR: "confirm", ROUND_ATTR: 1})  # its confirmation, stopped
    assert export_main(["--out", "best.yaml"]) == 0
    out = capsys.readouterr().out
    best = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert best["trials"] == answer_runs and best["rule"].startswith("the sweep's confirmed answer: 1.16x")
    assert best["later_trials"]["trials"] == later
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {best['later_trials']['note']}"]
    assert notes[0].startswith(f"note: the confirmed answer is from an earlier sweep (its confirmation ended at "
                               f"trial {later[0] - 1}); 2 later trial(s) (trials {later[0]} to {later[1]}, up to "
                               f"3,612 samples/s,")
    assert "fix: run the sweep again to confirm" in notes[0]

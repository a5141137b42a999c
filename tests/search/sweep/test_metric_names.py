"""Metric names the sweep optimises or constrains must be metrics the workload
reports: declared per workload and refused before the first trial, or, for a
user's own function, confirmed by its first trial."""
from __future__ import annotations

import textwrap
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from conftest import REPO, pythonpath, run_search
from objectives import parse_config, run_trial
from objectives.metrics import reported_metrics
from search.sweep.constraints import parse_constraints
from search.errors import BadInput
from search.sweep.metric_names import check_declared, named_metrics, sweep_metrics

TINY = {"train": {"budget_samples": 256, "warmup_steps": 1, "window_steps": 2, "eval_batch_size": 128}}


@pytest.mark.parametrize("objective", [
    {"name": "digits"},
    {"name": "resnet", "image_size_px": 32, "widths": [8], "num_classes": 10, "dataset_size": 64},
    {"name": "gpt", "corpus_max_bytes": 20000, "val_batches": 1},
])
def test_what_a_workload_reports_is_declared(objective: dict) -> None:
    cfg = {"objective": objective, "batch_size": 32, **TINY}
    result = run_trial(cfg)
    assert result.outcome == "ok", result.reason
    declared = reported_metrics(parse_config(cfg))
    assert set(result.metrics) <= declared, set(result.metrics) - declared
    assert "throughput_samples_per_s" in result.metrics
    assert ("val_accuracy" in result.metrics) == (objective["name"] != "resnet")
    assert ("val_accuracy" in declared) == (objective["name"] != "resnet")


def test_a_name_no_trial_reports_is_refused_with_the_reported_names_and_the_closest() -> None:
    declared = reported_metrics(parse_config({"objective": {"name": "digits"}}))
    named = named_metrics(["throughput_samples_per_s"], parse_constraints(["val_acuracy >= 0.9"]), {})
    with pytest.raises(BadInput) as err:
        check_declared(named, declared, "digits")
    line = str(err.value)
    assert line.startswith("hydra.sweeper.constraints must name metrics that objective 'digits' reports; "
                           "got 'val_acuracy'")
    assert "val_loss" in line and "peak_pss_tree_bytes" in line and "fix: name 'val_accuracy'" in line
    assert check_declared(named_metrics(["val_accuracy"], parse_constraints(["peak_pss_tree_bytes <= 4e9"]),
                                        {"throughput_samples_per_s": "hydra.sweeper.nightly.metric"}), declared,
                          "digits") == []
    assert "gpu_util_percent_mean" in sweep_metrics() and "energy_j_per_sample" in sweep_metrics()


def test_a_callable_declares_nothing_so_its_first_trial_must_confirm() -> None:
    cfg = parse_config({"objective": {"name": "custom", "callable": "mypkg.train:objective"}})
    assert reported_metrics(cfg) is None
    named = named_metrics(["score"], parse_constraints(["speed >= 1"]), {})
    assert sorted(check_declared(named, None, "custom")) == ["score", "speed"]


USER_OBJECTIVE = '''
def objective(cfg):
    """Reports a score, not the throughput and accuracy the default sweep names."""
    return {"score": float(cfg["batch_size"])}
'''


@pytest.mark.slow
def test_a_callable_whose_first_trial_lacks_a_named_metric_stops_the_sweep_with_exit_2(workdir: Path) -> None:
    (workdir / "user_objective_names.py").write_text(textwrap.dedent(USER_OBJECTIVE))
    result = run_search("multirun", "objective=custom", "objective.callable=user_objective_names:objective",
                        "hydra.sweeper.params=null", "batch_size=choice(32,64,128)", "hydra.sweeper.n_trials=3",
                        cwd=workdir, timeout_s=300, env={"PYTHONPATH": pythonpath(REPO, workdir)})
    assert result.returncode == 2, (result.stdout[-2000:], result.stderr[-2000:])
    errors = [line for line in result.stderr.splitlines() if line.startswith("search: error:")]
    assert len(errors) == 1 and "its first trial reported" in errors[0] and "score" in errors[0], result.stderr
    assert "not throughput_samples_per_s, val_accuracy" in errors[0] and "fix:" in errors[0]
    storage = JournalStorage(JournalFileBackend(str(workdir / "optuna.journal")))
    [trial] = optuna.load_study(study_name="user_objective_names.objective", storage=storage).trials
    assert trial.user_attrs["outcome"] == "infeasible"

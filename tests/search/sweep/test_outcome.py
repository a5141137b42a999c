"""What Optuna is told for each outcome, and constraints in the form both
Optuna 5 and optuna-dashboard read, on a real in-memory study."""
from __future__ import annotations

import math

import optuna
import pytest

from search.errors import BadInput
from search.record import is_feasible, named_constraints
from search.reports.tables import front_trials
from search.sweep.constraints import parse_constraints
from search.sweep.outcome import score, tell

METRICS = ["throughput_samples_per_s", "val_accuracy"]


def told(study: optuna.Study, result, constraints=()) -> optuna.trial.FrozenTrial:
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    tell(study, trial, score(result, METRICS, len(study.directions), list(constraints)),
         [d.name.lower() for d in study.directions])
    return study.trials[trial.number]


def ok(throughput: float, accuracy: float) -> dict:
    return {"outcome": "ok", "metrics": {"throughput_samples_per_s": throughput, "val_accuracy": accuracy}}


def test_constraint_marks_violating_trials_infeasible_and_never_best() -> None:
    study = optuna.create_study(directions=["maximize", "maximize"])
    rules = parse_constraints(["val_accuracy >= 0.97"])
    fast_inaccurate = told(study, ok(5000.0, 0.90), rules)
    slow_accurate = told(study, ok(1000.0, 0.98), rules)
    assert named_constraints(fast_inaccurate)["val_accuracy >= 0.97"] == pytest.approx(0.07)
    assert fast_inaccurate.system_attrs["constraints"] == [0.0, pytest.approx(0.07)]  # what the dashboard reads
    assert not is_feasible(fast_inaccurate) and is_feasible(slow_accurate)
    assert [t.number for t in study.best_trials] == [slow_accurate.number]
    assert [t.number for t in front_trials(study)] == [slow_accurate.number]


def test_single_objective_constraint_mode_best_satisfies_constraints() -> None:
    study = optuna.create_study(direction="maximize")
    rules = parse_constraints(["val_accuracy >= 0.97", "peak_pss_tree_bytes <= 1e9"])
    score_one = lambda r: score(r, ["throughput_samples_per_s"], 1, rules)
    for metrics in ({"throughput_samples_per_s": 9000.0, "val_accuracy": 0.99, "peak_pss_tree_bytes": 2e9},
                    {"throughput_samples_per_s": 8000.0, "val_accuracy": 0.90, "peak_pss_tree_bytes": 5e8},
                    {"throughput_samples_per_s": 3000.0, "val_accuracy": 0.98, "peak_pss_tree_bytes": 5e8}):
        trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
        tell(study, trial, score_one({"outcome": "ok", "metrics": metrics}), ["maximize"])
    assert study.best_trial.values == [3000.0]
    assert [t.values for t in front_trials(study)] == [[3000.0]]


@pytest.mark.parametrize("outcome", ["oom", "infeasible"])
def test_hardware_limits_are_violated_constraints_not_failures(outcome: str) -> None:
    study = optuna.create_study(directions=["maximize", "maximize"])
    trial = told(study, {"outcome": outcome, "reason": "no room", "metrics": {"peak_pss_tree_bytes": 7.0}})
    assert trial.state == optuna.trial.TrialState.COMPLETE
    assert named_constraints(trial) == {"runnable": 1.0} and trial.constraints == {"0": 1.0}
    assert trial.user_attrs["outcome"] == outcome and trial.user_attrs["metrics"]["peak_pss_tree_bytes"] == 7.0
    assert study.best_trials == []


def test_infeasible_trials_carry_every_constraint_so_gp_can_model_them() -> None:
    """GPSampler (the default) refuses trials with different constraint sets."""
    study = optuna.create_study(directions=["maximize", "maximize"],
                                sampler=optuna.samplers.GPSampler(seed=0, n_startup_trials=2))
    rules = parse_constraints(["val_accuracy >= 0.9"])
    infeasible = told(study, {"outcome": "infeasible", "reason": "2 ranks x 2 threads > 2 cores"}, rules)
    told(study, ok(1000.0, 0.95), rules)
    told(study, ok(2000.0, 0.85), rules)
    assert named_constraints(infeasible) == {"runnable": 1.0, "val_accuracy >= 0.9": 1.0}
    assert 0 <= told(study, ok(1500.0, 0.92), rules).params["x"] <= 1  # the GP is fitted: no ValueError


@pytest.mark.parametrize("search_for", ["answer", "front"])
def test_a_study_written_with_named_constraints_goes_on_with_the_gp_sampler(search_for: str) -> None:
    """Studies written before keep `constraints:<name>` keys beside the new trials' list. Optuna 5.1's GPSampler
    refuses such a mix ("The constraint names must be the same for all trials"); the sweep's view of the study
    shows it every trial's values as one list, `runnable` first."""
    from search.sweep.gp_view import gp_view

    gp = optuna.samplers.GPSampler(seed=0, n_startup_trials=2)
    study = optuna.create_study(directions=["maximize", "maximize"],
                                sampler=gp_view(gp, search_for, METRICS, ["maximize", "maximize"], 0.005))
    rules = parse_constraints(["val_accuracy >= 0.9"])
    old = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    old.set_constraint("runnable", 0.0)
    old.set_constraint("val_accuracy >= 0.9", 0.0)
    study.tell(old, [1000.0, 0.95])
    told(study, ok(2000.0, 0.85), rules)
    assert named_constraints(study.trials[0]) == {"runnable": 0.0, "val_accuracy >= 0.9": 0.0}
    assert 0 <= told(study, ok(1500.0, 0.92), rules).params["x"] <= 1
    assert [is_feasible(t) for t in study.trials] == [True, False, True]


@pytest.mark.parametrize("outcome", ["diverged", "crashed", "timeout"])
def test_failures_are_failed_trials_with_their_reason(outcome: str) -> None:
    study = optuna.create_study(directions=["maximize", "maximize"])
    trial = told(study, {"outcome": outcome, "reason": "why", "metrics": {"val_loss": math.inf}})
    assert trial.state == optuna.trial.TrialState.FAIL
    assert trial.user_attrs["reason"] == "why"
    assert trial.user_attrs["metrics"] == {"val_loss": math.inf}


def test_a_missing_objective_metric_is_infeasible_not_a_crash() -> None:
    study = optuna.create_study(direction="minimize")
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    scored = score({"outcome": "ok", "metrics": {"reached_target": 0.0}}, ["time_to_accuracy_s"], 1, [])
    tell(study, trial, scored, ["minimize"])
    assert scored.outcome == "infeasible" and "time_to_accuracy_s" in scored.reason
    assert named_constraints(study.trials[0]) == {"runnable": 1.0}


def test_plain_hydra_tasks_may_return_numbers() -> None:
    assert score(0.5, None, 1, []).values == [0.5]
    assert score([1, 2], None, 2, []).values == [1.0, 2.0]
    assert score("x", None, 1, []).outcome == "crashed"


@pytest.mark.parametrize("rule", ["val_accuracy > 0.9", "val_accuracy >= high", "0.9 <= val_accuracy", ""])
def test_malformed_constraints_are_bad_input(rule: str) -> None:
    with pytest.raises(BadInput, match="metric >= number"):
        parse_constraints([rule])

"""What a trial's MLflow run says about it, built from real scored results and a real Optuna study: whether it
is feasible and which rule it broke, its constraint values by name, its name, the accuracy it copied."""
from __future__ import annotations

import shlex

import optuna

from search.record import ACCURACY_FROM_ATTR
from search.sweep.closing import end_tags, run_name
from search.sweep.constraints import broken_text, parse_constraints
from search.sweep.outcome import score, tell
from search.sweep.reproduce import configuration_overrides, paste_line
from search.sweep.staging import logged_metrics

METRICS = ["throughput_samples_per_s", "val_accuracy"]
RULES = parse_constraints(["val_accuracy >= 0.93", "params_count <= 7000"])


def tags_of(result: dict) -> dict[str, str]:
    """The tags closing.py ends the run with, after Optuna was told (which names the constraints)."""
    study = optuna.create_study(directions=["maximize", "maximize"])
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    scored = score(result, METRICS, 2, RULES)
    tell(study, trial, scored, ["maximize", "maximize"])
    return end_tags(scored, trial.user_attrs, broken_text(RULES, scored.metrics))


def test_a_trial_breaking_a_rule_says_so_in_its_own_tags_not_only_inside_the_constraints() -> None:
    # was: search.outcome=ok, search.reason='' and "{'runnable': 0.0, 'val_accuracy >= 0.93': 0.0971}" only
    tags = tags_of({"outcome": "ok", "metrics": {"throughput_samples_per_s": 900.0, "val_accuracy": 0.8329,
                                                 "params_count": 5000.0}})
    assert tags["search.feasible"] == "false"
    assert tags["search.violated"] == "val_accuracy >= 0.93 (got 0.8329)"
    assert tags["search.constraint_violations"] == "runnable: 0; val_accuracy >= 0.93: 0.0971; params_count <= 7000: -2000"
    assert "search.constraints" not in tags  # the str()'d dict, whose 'runnable: 0.0' read as "not runnable"


def test_a_feasible_trial_has_no_violated_tag_and_a_failed_one_names_runnable_first() -> None:
    ok = tags_of({"outcome": "ok", "metrics": {"throughput_samples_per_s": 900.0, "val_accuracy": 0.95,
                                               "params_count": 5000.0}})
    assert ok["search.feasible"] == "true" and "search.violated" not in ok
    both = tags_of({"outcome": "ok", "metrics": {"throughput_samples_per_s": 900.0, "val_accuracy": 0.9,
                                                 "params_count": 9978.0}})
    assert both["search.violated"] == "val_accuracy >= 0.93 (got 0.9), params_count <= 7000 (got 9,978)"
    oom = tags_of({"outcome": "oom", "reason": "CUDA out of memory", "metrics": {}})
    assert oom["search.feasible"] == "false" and oom["search.reason"] == "CUDA out of memory"
    assert oom["search.violated"] == ("runnable (outcome oom), val_accuracy >= 0.93 (got none), "
                                      "params_count <= 7000 (got none)")


def test_run_names_say_what_the_trial_was_run_for() -> None:
    assert run_name(7, {}) == "trial-7"
    assert run_name(0, {"search.trial_role": "baseline"}) == "trial-0 baseline"
    assert run_name(1, {"search.trial_role": "baseline", "search.seed": 1}) == "trial-1 baseline seed 1"
    assert run_name(20, {"search.trial_role": "confirm", "search.confirm_round": 1, ACCURACY_FROM_ATTR: 4}) == \
        "trial-20 confirm r1 timed"
    assert run_name(24, {"search.trial_role": "seed_check", "search.seed": 1}) == "trial-24 seed check seed 1"
    assert run_name(9, {ACCURACY_FROM_ATTR: 0, "search.retry_of": 3}) == "trial-9 retry of 3 timed"


def test_a_copied_accuracy_is_logged_under_its_own_name_and_a_measured_one_as_it_is() -> None:
    metrics = {"throughput_samples_per_s": 900.0, "val_accuracy": 0.94, "val_loss": 0.3}
    assert logged_metrics(metrics, {}) == metrics
    assert logged_metrics(metrics, {ACCURACY_FROM_ATTR: 0}) == {
        "throughput_samples_per_s": 900.0, "val_accuracy_of_same_maths": 0.94, "val_loss_of_same_maths": 0.3}


def test_the_overrides_line_pastes_into_a_shell_as_the_overrides_hydra_gets() -> None:
    launched = ["hydra.searchpath=[file:///home/me/my conf]", "objective=mlp", "hydra.sweeper.n_trials=4",
                "objective.note='a b'", "batch_size=32", "loader.pin_memory=null", "train.seed=1",
                "train.throughput_only=true", "train.stop_below_samples_per_s=812.5"]
    kept = configuration_overrides(launched)
    assert kept == ["hydra.searchpath=[file:///home/me/my conf]", "objective=mlp", "objective.note='a b'",
                    "batch_size=32", "loader.pin_memory=null", "train.seed=1"]  # a run at another seed keeps it
    assert shlex.split(paste_line(kept)) == kept
    assert paste_line(["objective=digits", "batch_size=64"]) == "objective=digits batch_size=64"

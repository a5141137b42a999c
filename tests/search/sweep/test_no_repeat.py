"""A configuration that already ran is not run again while unseen ones remain
(real Optuna, TPE, in-process)."""
from __future__ import annotations

import random

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from search.sweep.no_repeat import REPEAT_ATTR, ask_unseen

SPACE = {"a": CategoricalDistribution([1, 2, 3]), "b": CategoricalDistribution(["x", "y"])}  # 6 configurations


def test_tpe_repeats_are_replaced_by_unseen_configurations_until_the_space_is_used_up() -> None:
    study = optuna.create_study(directions=["maximize", "maximize"],
                                sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=2))
    rng = random.Random(0)
    ran = []
    for _ in range(6):
        trial = ask_unseen(study, SPACE, rng)
        ran.append((trial.params["a"], trial.params["b"]))
        study.tell(trial, [float(trial.params["a"]), 1.0 if trial.params["b"] == "x" else 0.0])
    assert len(set(ran)) == 6  # every configuration once, none twice
    skipped = [t for t in study.trials if t.state == TrialState.FAIL]
    assert skipped  # TPE did propose repeats (2 with this seed)
    assert all(REPEAT_ATTR in t.user_attrs and t.user_attrs["outcome"] == "skipped" for t in skipped)
    seventh = ask_unseen(study, SPACE, rng)  # nothing unseen is left: the proposal runs
    assert (seventh.params["a"], seventh.params["b"]) in set(ran)


def test_the_rule_aware_sampler_repairs_repeats_before_a_trial_number_is_spent() -> None:
    """TPE and GP keep proposing the best configuration; wrapped, they run every configuration once, with
    no trial failed as a skipped repeat, and say which proposals they repaired."""
    from search.sweep.rule_sampler import REPAIRED_ATTR, within_rules

    for base in (optuna.samplers.TPESampler(seed=0, n_startup_trials=2, multivariate=True),
                 optuna.samplers.GPSampler(seed=0, n_startup_trials=2)):
        study = optuna.create_study(directions=["maximize", "maximize"], sampler=within_rules(base, None, seed=0))
        ran = []
        for _ in range(6):
            trial = ask_unseen(study, SPACE, random.Random(0))
            ran.append((trial.params["a"], trial.params["b"]))
            study.tell(trial, [float(trial.params["a"]), 1.0 if trial.params["b"] == "x" else 0.0])
        assert len(set(ran)) == 6, ran
        assert all(t.state == TrialState.COMPLETE for t in study.trials)  # none skipped
        assert any(REPAIRED_ATTR in t.user_attrs for t in study.trials)  # the model did ask for a repeat

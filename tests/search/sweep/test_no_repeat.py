"""A configuration that already ran is not run again while unseen ones remain
(real Optuna, TPE, in-process)."""
from __future__ import annotations

import random

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from conftest import run_search
from search.record import REPEAT_ATTR
from search.sweep.no_repeat import ask_unseen
from sweep_results import load_study

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
    from search.record import REPAIRED_ATTR
    from search.sweep.rule_sampler import within_rules

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


def test_a_configuration_written_another_way_that_runs_the_same_here_is_a_repeat() -> None:
    """On a GPU, loader.pin_memory null is on (the baseline's null is added to a choice(false, true) space):
    null and true run the same there, so of the 3 x 2 written configurations only 4 are different runs,
    and each runs once before any runs again; on a CPU, where neither null nor true pins memory, 2."""
    from objectives import Hardware
    from objectives.config import parse_values
    from search.sweep.baseline import fit_baseline
    from search.sweep.combinations import fit_to_rules
    from search.sweep.rule_sampler import within_rules
    from search.sweep.space import build_space

    gpu = Hardware(cpu_cores=16, gpu_count=1, compute_capability=(9, 0))
    cpu = Hardware(cpu_cores=2, why_no_gpu="none here")
    for hardware, runs in ((gpu, 4), (cpu, 2)):
        space, _ = fit_to_rules(build_space({}, ["loader.pin_memory=choice(false,true)", "batch_size=choice(32,64)"]),
                                parse_values({}), hardware)
        space, _ = fit_baseline(space, {"loader.pin_memory": None, "batch_size": 32})  # as the sweep widens it
        assert len(space.distributions["loader.pin_memory"].choices) == 3
        study = optuna.create_study(directions=["maximize"], sampler=within_rules(
            optuna.samplers.TPESampler(seed=0, n_startup_trials=2, multivariate=True), space.forbids, 0,
            space.runs_as))
        ran = []
        for _ in range(runs):
            trial = ask_unseen(study, space.distributions, random.Random(0), space.forbids, space.runs_as)
            ran.append(space.runs_as(trial.params))
            study.tell(trial, float(trial.params["batch_size"]))
        assert len({tuple(sorted(r.items())) for r in ran}) == runs, (hardware, ran)


def test_a_key_the_other_values_leave_without_effect_makes_no_new_configuration() -> None:
    """Without workers DataLoader is not given persistent_workers: a default sweep here ran batch 32 on two
    ranks with and without it as two trials. Of the 2 x 2 x 2 written configurations 6 are different runs,
    each runs once, and only then does one run again."""
    from objectives import Hardware
    from objectives.config import parse_values
    from search.sweep.combinations import fit_to_rules
    from search.sweep.rule_sampler import within_rules
    from search.sweep.space import build_space

    sweeps = ["loader.num_workers=choice(0,2)", "loader.persistent_workers=choice(false,true)", "batch_size=choice(32,64)"]
    space, _ = fit_to_rules(build_space({}, sweeps), parse_values({}), Hardware(cpu_cores=2, why_no_gpu="none here"))
    assert space.runs_as({"loader.num_workers": 0, "loader.persistent_workers": True, "batch_size": 32}) == \
        {"loader.num_workers": 0, "batch_size": 32}
    study = optuna.create_study(directions=["maximize"], sampler=within_rules(
        optuna.samplers.TPESampler(seed=0, n_startup_trials=2, multivariate=True), space.forbids, 0, space.runs_as))
    ran = []
    for _ in range(6):
        trial = ask_unseen(study, space.distributions, random.Random(0), space.forbids, space.runs_as)
        ran.append(tuple(sorted(space.runs_as(trial.params).items())))
        study.tell(trial, float(trial.params["batch_size"]))
    assert len(set(ran)) == 6, ran
    assert all(t.state == TrialState.COMPLETE for t in study.trials)


def test_the_space_s_configurations_are_counted_within_its_rules_as_they_run() -> None:
    from optuna.distributions import IntDistribution

    from search.sweep.no_repeat import configuration_key, every_configuration

    space = {"batch_size": CategoricalDistribution([32, 64]), "parallel.devices": IntDistribution(1, 2)}
    forbids = lambda p: "too many" if p["batch_size"] == 64 and p["parallel.devices"] == 2 else None  # noqa: E731
    assert every_configuration(space, forbids) == {
        configuration_key({"batch_size": 32, "parallel.devices": 1}), configuration_key({"batch_size": 32,
        "parallel.devices": 2}), configuration_key({"batch_size": 64, "parallel.devices": 1})}
    assert every_configuration({"optim.lr": optuna.distributions.FloatDistribution(1e-4, 1e-2)}) is None
    assert every_configuration(space, most=3) is None  # 4 combinations: its end is n_trials


def test_a_sweep_stops_once_every_configuration_of_its_space_ran(workdir) -> None:
    """A 2-configuration space with n_trials=20 spent 15 trials timing the same configuration again."""
    done = run_search("multirun", "hydra.sweeper.params=null", "batch_size=choice(32,64)", "hydra.sweeper.n_trials=20",
                      "train.budget_samples=600", cwd=workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "every configuration of the space (2) has run: stopping after 2 new trials" in done.stdout
    trials = load_study(workdir).get_trials(deepcopy=False)
    assert sorted(t.params["batch_size"] for t in trials) == [32, 64]

"""The start design (search/sweep/start_design.py): after your configuration's runs, each knob moved once from the
fastest configuration at your accuracy so far; a move that went too far halfway back; a fast configuration below
your accuracy with its learning rate retuned."""
from __future__ import annotations

import random

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState

from conftest import run_search
from objectives import Hardware
from objectives.config import parse_values
from objectives.knobs import SPEED_ONLY, WORK_NEUTRAL
from search.record import (ACCURACY_FROM_ATTR, HALFWAY_ATTR, MOVED_FROM_ATTR, RECIPE_ATTR, RETUNED_ATTR, ROLE_ATTR,
                           SEED_ATTR, START_ATTR)
from search.sweep.combinations import fit_to_rules
from search.sweep.roles import enqueued_as_asked
from search.sweep.space import Space, build_space
from search.sweep.start_design import farthest, halfway, knob_order, next_move
from sweep_results import load_study

TWO_CORES = Hardware(cpu_cores=2, why_no_gpu="none here")
DISTRIBUTIONS = {
    "loader.num_workers": CategoricalDistribution([0, 1, 2]),
    "batch_size": CategoricalDistribution([32, 64, 128, 256, 512]),
    "precision": CategoricalDistribution(["fp32", "tf32", "bf16", "fp16"]),
    "optim.lr": CategoricalDistribution([0.001, 0.002, 0.005, 0.01]),
}
BASE = {"loader.num_workers": 0, "batch_size": 64, "precision": "fp32", "optim.lr": 0.002}
FLOOR = 0.9 - 0.005  # your configuration's accuracy less the tolerance


def study_with(*trials: tuple[dict, dict]) -> optuna.Study:
    """A study holding your configuration's run (0.9 val_accuracy, 100 samples/s) and then `trials`, each
    (params, user attributes: `metrics` and `outcome` among them, ok by default)."""
    study = optuna.create_study(directions=["maximize", "maximize"])
    rows = [(BASE, {"metrics": {"throughput_samples_per_s": 100.0, "val_accuracy": 0.9}, ROLE_ATTR: "baseline"}),
            *trials]
    for params, attrs in rows:
        m = attrs.get("metrics", {})
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions={k: DISTRIBUTIONS[k] for k in params},
            values=[m.get("throughput_samples_per_s", 0.0), m.get("val_accuracy", 0.0)],
            user_attrs={"outcome": "ok", **attrs}))
    return study


def ran(thr: float, acc: float | None = None, **attrs) -> dict:
    metrics = {"throughput_samples_per_s": thr} | ({"val_accuracy": acc} if acc is not None else {})
    return {"metrics": metrics, **attrs}


def move(study: optuna.Study, prior: dict | None = None, seed: int = 0, order: list[str] | None = None):
    space = Space(DISTRIBUTIONS, [])
    return next_move(study, FLOOR, space, order or ["loader.num_workers", "batch_size", "precision"], prior or {},
                     random.Random(seed))


def test_far_ends_halfway_and_the_order_of_the_knobs():
    assert farthest(DISTRIBUTIONS["batch_size"], 64, random.Random(0)) == [512]  # one below, three above
    assert farthest(DISTRIBUTIONS["loader.num_workers"], 1, random.Random(0)) == [0, 2]  # in the middle: both
    assert farthest(FloatDistribution(1e-4, 1e-1, log=True), 1e-3, random.Random(0)) == [1e-1]  # log scale
    drawn = {farthest(DISTRIBUTIONS["precision"], "fp32", random.Random(s), lambda v: v != "fp16")[0]
             for s in range(20)}
    assert drawn == {"tf32", "bf16"}  # a choice that is not a number: drawn among those the rules allow
    assert halfway(DISTRIBUTIONS["batch_size"], 64, 512) == 256  # nearer the move when two lie between
    assert halfway(DISTRIBUTIONS["batch_size"], 64, 128) is None
    assert halfway(DISTRIBUTIONS["batch_size"], 512, 32) == 128
    orders = {tuple(knob_order(DISTRIBUTIONS, random.Random(s))) for s in range(20)}
    for order in orders:  # speed-only knobs first; the learning rate never moved alone (the same work, same speed)
        assert set(order[:1]) <= SPEED_ONLY and "optim.lr" not in order
    assert len(orders) > 1 and {"optim.lr"} <= WORK_NEUTRAL  # seeds move the knobs in other orders


def test_each_move_starts_from_the_fastest_configuration_at_your_accuracy_so_far():
    first = move(study_with())
    assert first.params == {**BASE, "loader.num_workers": 2} and first.attrs == {START_ATTR: "loader.num_workers",
                                                                                  MOVED_FROM_ATTR: 0}
    paid = study_with(({**BASE, "loader.num_workers": 2}, ran(150, 0.9, **first.attrs)))
    second = move(paid)  # workers paid: batch size moves from there
    assert second.params == {**BASE, "loader.num_workers": 2, "batch_size": 512}
    assert second.attrs == {START_ATTR: "batch_size", MOVED_FROM_ATTR: 1}
    assert "one knob moved from trial 1" in second.line


def test_a_knob_whose_first_move_started_in_the_middle_gets_its_other_end():
    best = {**BASE, "loader.num_workers": 1, "precision": "bf16"}  # the best so far: workers at 1
    study = study_with((best, ran(150, 0.9)),
                       ({**best, "loader.num_workers": 2}, ran(120, 0.9, **{START_ATTR: "loader.num_workers",
                                                                           MOVED_FROM_ATTR: 1})))
    other = move(study)  # before the next knob
    assert other.params == {**best, "loader.num_workers": 0} and other.attrs[START_ATTR] == "loader.num_workers"


@pytest.mark.parametrize("went", [ran(300, 0.7), ran(300, outcome="stopped_early"), ran(0, outcome="oom")],
                         ids=["below the floor", "stopped early", "out of memory"])
def test_a_move_that_went_too_far_is_taken_halfway_back_again_and_again(went):
    moved = {**BASE, "batch_size": 512}
    study = study_with((moved, {**went, START_ATTR: "batch_size", MOVED_FROM_ATTR: 0}))
    back = move(study)
    assert back.params == {**BASE, "batch_size": 256}
    assert back.attrs == {HALFWAY_ATTR: "batch_size", MOVED_FROM_ATTR: 0}
    again = study_with((moved, {**went, START_ATTR: "batch_size", MOVED_FROM_ATTR: 0}),
                       (back.params, {**went, **back.attrs}))
    assert move(again).params == {**BASE, "batch_size": 128}  # a bisection towards where it started


def test_a_slower_move_is_not_taken_back_and_the_recipes_batch_is():
    slower = study_with(({**BASE, "batch_size": 512}, ran(80, 0.8, **{START_ATTR: "batch_size",
                                                                      MOVED_FROM_ATTR: 0})))
    assert HALFWAY_ATTR not in move(slower).attrs  # no faster between: the next knob
    recipe = {**BASE, "batch_size": 512, "precision": "bf16"}
    study = study_with((BASE, ran(100, 0.9, **{ROLE_ATTR: "baseline", SEED_ATTR: 1})),
                       (recipe, ran(0, outcome="oom", **{RECIPE_ATTR: "a GPU"})))
    assert move(study).params == {**recipe, "batch_size": 256}  # the recipe itself, halfway back in batch


def test_a_fast_work_below_your_accuracy_gets_its_learning_rate_retuned():
    fast = {**BASE, "batch_size": 256}
    study = study_with((fast, ran(300, 0.8)))
    retuned = move(study)
    assert retuned.params == {**fast, "optim.lr": 0.005} and retuned.attrs == {RETUNED_ATTR: "optim.lr",
                                                                               MOVED_FROM_ATTR: 1}
    study = study_with((fast, ran(300, 0.8)), ({**fast, "optim.lr": 0.005}, ran(300, 0.85)))
    assert move(study).params == {**fast, "optim.lr": 0.01}  # up again, from its most accurate run
    slow = study_with(({**BASE, "batch_size": 128}, ran(105, 0.8)))  # within noise of the best: not worth a trial
    assert RETUNED_ATTR not in move(slow).attrs


def test_a_knob_that_is_not_a_number_moves_to_the_recipes_value():
    study = study_with()
    assert move(study, {"precision": "fp16"}, order=["precision"]).params == {**BASE, "precision": "fp16"}
    drawn = {move(study, seed=s, order=["precision"]).params["precision"] for s in range(20)}
    assert drawn == {"tf32", "bf16", "fp16"}  # no recipe: drawn with the seed


def test_no_move_before_the_floor_is_known_nor_a_move_without_effect():
    space, _ = fit_to_rules(build_space({}, ["loader.num_workers=choice(0,1,2)",
                                             "loader.persistent_workers=choice(false,true)"]),
                            parse_values({}), TWO_CORES)
    study = optuna.create_study(directions=["maximize", "maximize"])
    assert next_move(study, None, space, ["loader.persistent_workers"], {}, random.Random(0)) is None
    study.add_trial(optuna.trial.create_trial(
        params={"loader.num_workers": 0, "loader.persistent_workers": False}, distributions=space.distributions,
        values=[100.0, 0.9], user_attrs={"outcome": "ok", ROLE_ATTR: "baseline",
                                         "metrics": {"throughput_samples_per_s": 100.0, "val_accuracy": 0.9}}))
    # persistent workers mean nothing without workers: that move would time your configuration again
    assert next_move(study, FLOOR, space, ["loader.persistent_workers"], {}, random.Random(0)) is None


def test_design_trials_are_proposals_the_baseline_is_measured_as_asked():
    study = study_with()
    study.enqueue_trial(BASE, user_attrs={ROLE_ATTR: "baseline"})
    m = move(study)
    study.enqueue_trial(m.params, user_attrs=m.attrs)
    baseline, start = study.ask(DISTRIBUTIONS), study.ask(DISTRIBUTIONS)
    assert enqueued_as_asked(study, baseline)  # never stopped early, trained in full
    assert not enqueued_as_asked(study, start)  # early stopping and staging apply


def test_a_sweep_moves_each_knob_from_the_best_so_far_and_a_rerun_goes_on(workdir):
    args = ["multirun", "hydra.sweeper.params=null", "batch_size=choice(64,128)", "loader.num_workers=choice(0,1)",
            "parallel.threads=choice(1,2)", "train.budget_samples=800", "hydra.sweeper.baseline_repeats=1",
            "hydra.sweeper.confirm_budget=0", "hydra.sweeper.seed=0"]
    result = run_search(*args, "hydra.sweeper.n_trials=4", cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    said = " ".join(result.stdout.split())
    assert "start: each knob moved once from the fastest configuration at your accuracy so far (" in said
    trials = load_study(workdir).get_trials(deepcopy=False)
    # your configuration, the practitioner's recipe on a CPU (its cores' threads, a loader worker), then the moves
    assert RECIPE_ATTR in trials[1].user_attrs and "recipe: what a practitioner tries first on CPU" in said
    moves = trials[2:]
    assert [t.user_attrs.get(START_ATTR) for t in moves][:1] in (["loader.num_workers"], ["parallel.threads"])
    for t in moves:  # speed-only knobs first: timed only, each from the best so far
        start = trials[t.user_attrs[MOVED_FROM_ATTR]].params
        assert {k for k in t.params if t.params[k] != start[k]} == {t.user_attrs[START_ATTR]}
        assert (t.user_attrs.get(ACCURACY_FROM_ATTR) is not None) == (t.user_attrs[START_ATTR] in SPEED_ONLY)

    again = run_search(*args, "hydra.sweeper.n_trials=2", cwd=workdir)  # the study resumes where it stood
    assert again.returncode == 0, again.stderr[-3000:]
    assert "start: each knob moved once" not in again.stdout
    study = load_study(workdir)
    moved = {t.user_attrs.get(START_ATTR) for t in study.trials if START_ATTR in t.user_attrs}
    assert "batch_size" in moved
    assert not [t for t in study.trials if t.state in (TrialState.WAITING, TrialState.RUNNING)]


@pytest.mark.parametrize("start", [["hydra.sweeper.start_design=sampler"],
                                   ["hydra/sweeper/sampler=tpe"],
                                   # not the answer's question: a baseline, but no accuracy to hold
                                   ["hydra.sweeper.metrics=[throughput_samples_per_s]",
                                    "hydra.sweeper.direction=[maximize]"]],
                         ids=["start_design=sampler", "tpe", "throughput alone"])
def test_the_sampler_keeps_its_own_start(workdir, start):
    result = run_search("multirun", "hydra.sweeper.params=null", "batch_size=choice(64,128)",
                        "train.budget_samples=600", "hydra.sweeper.n_trials=2", "hydra.sweeper.baseline_repeats=1",
                        "hydra.sweeper.confirm_budget=0", *start, cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "start:" not in result.stdout and "recipe:" not in result.stdout
    assert not any(START_ATTR in t.user_attrs for t in load_study(workdir).trials)
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    [sweep_run] = client.search_runs([e.experiment_id for e in client.search_experiments()],
                                     "tags.`search.role` = 'sweep'")
    assert sweep_run.data.params["start_design"] == "sampler"  # the start as run

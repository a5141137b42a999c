"""Searching for the answer, a configuration whose maths trained below the floor is not proposed: staging would
score it below the floor (real Optuna samplers on an in-memory study; one real digits sweep)."""
from __future__ import annotations

import random

import optuna
import pytest
from optuna.distributions import CategoricalDistribution

from conftest import run_search
from search.record import ACCURACY_FROM_ATTR, SEED_ATTR
from search.sweep.no_repeat import ask_unseen, configuration_key
from search.sweep.roles import enqueue
from search.sweep.rule_sampler import within_rules
from search.sweep.settled import at_floor, below_floor
from search.sweep.staging import maths_of
from sweep_results import load_study

SPACE = {"batch_size": CategoricalDistribution([64, 128]), "model_pruning.ratio": CategoricalDistribution([0.0, 0.5]),
         "loader.num_workers": CategoricalDistribution([0, 1, 2])}  # 12 configurations
BASELINE = {"batch_size": 64, "model_pruning.ratio": 0.0, "loader.num_workers": 0}


def _told(study: optuna.Study, trial: optuna.Trial, accuracy: float, **attrs) -> None:
    """As the sweep tells a trial that ended ok: its outcome and metrics as user attributes, then its values."""
    p = trial.params
    throughput = 1000.0 * (2 if p["model_pruning.ratio"] else 1) * (1 + p["loader.num_workers"])  # pruned: fast
    for k, v in {"outcome": "ok", "metrics": {"throughput_samples_per_s": throughput, "val_accuracy": accuracy},
                 **attrs}.items():
        trial.set_user_attr(k, v)
    study.tell(trial, [throughput, accuracy])


def _accuracy(params: dict) -> float:
    return 0.90 if params["model_pruning.ratio"] else 0.97  # model pruning: below the floor (0.965)


def _study(settled: bool, base: optuna.samplers.BaseSampler) -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=within_rules(
        base, None, seed=0, settled=below_floor(0.005) if settled else None))
    enqueue(study, BASELINE, "baseline")
    enqueue(study, {**BASELINE, "model_pruning.ratio": 0.5}, "move")  # pruned alone: trained, below the floor
    for _ in range(2):
        trial = ask_unseen(study, SPACE, random.Random(0))
        _told(study, trial, _accuracy(trial.params))
    return study


def test_the_floor_settles_the_maths_that_trained_below_it_and_no_other() -> None:
    study = _study(True, optuna.samplers.RandomSampler(seed=0))
    settled = below_floor(0.005)(study)
    assert settled == {maths_of(configuration_key({**BASELINE, "model_pruning.ratio": 0.5}))}
    assert ("loader.num_workers", "0") not in next(iter(settled))  # a speed-only knob is no part of the maths
    # a timed-only run or a run at another seed trains nothing this study's floor reads
    for attrs in ({ACCURACY_FROM_ATTR: 0}, {SEED_ATTR: 1}):
        study.enqueue_trial({"batch_size": 128, "model_pruning.ratio": 0.0, "loader.num_workers": 0})
        trial = ask_unseen(study, SPACE, random.Random(0))
        _told(study, trial, 0.5, **attrs)
        assert below_floor(0.005)(study) == settled
    assert below_floor(0.005)(optuna.create_study(directions=["maximize", "maximize"])) == frozenset()  # no floor yet


@pytest.mark.parametrize("make, asks_for_it", [
    (lambda: optuna.samplers.TPESampler(seed=0, n_startup_trials=0, multivariate=True), True),
    (lambda: optuna.samplers.GPSampler(seed=0, n_startup_trials=0), False),
    (lambda: optuna.samplers.RandomSampler(seed=0), False)], ids=["tpe", "gp", "random"])
def test_a_configuration_of_maths_below_the_floor_is_not_proposed_while_another_is_unseen(make, asks_for_it) -> None:
    """Pruned maths is twice as fast: the models propose it again with other loader workers unless it is settled.
    Of the 12 configurations 2 ran, 2 more are settled (the pruned maths that ran, with 1 or 2 workers): the 5
    proposals are 5 of the other 8 (batch 128 pruned is other maths: it may run)."""
    pruned_maths = {**BASELINE, "model_pruning.ratio": 0.5}
    for settled in (True, False):
        study = _study(settled, make())
        for _ in range(5):
            trial = ask_unseen(study, SPACE, random.Random(0))
            _told(study, trial, _accuracy(trial.params))
        again = [t.number for t in study.trials[2:]
                 if maths_of(configuration_key(t.params)) == maths_of(configuration_key(pruned_maths))]
        if settled:
            assert not again, [t.params for t in study.trials]
            assert len({configuration_key(t.params) for t in study.trials}) == 7  # each once
        else:
            assert bool(again) or not asks_for_it  # TPE, unsettled, times the pruned maths with other workers


def test_a_sweep_times_no_configuration_whose_maths_trained_below_the_floor(workdir) -> None:
    """Model pruning at 0.9 trains below your accuracy; the loader and thread settings of your maths are tried
    instead of one of its (without the rule, the GP timed `model_pruning.ratio=0.9 loader.num_workers=2` next,
    2.4x your speed and scored below the floor). Early stopping is off so that the pruned move trains."""
    result = run_search("multirun", "hydra.sweeper.params=null", "model_pruning.ratio=choice(0.0,0.9)",
                        "loader.num_workers=choice(0,1,2)", "parallel.threads=choice(1,2)", "train.budget_samples=2000",
                        "hydra.sweeper.n_trials=7", "hydra.sweeper.early_stopping=false",
                        "hydra.sweeper.baseline_repeats=1", "hydra.sweeper.confirm_budget=0", "hydra.sweeper.seed=0",
                        cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    trials = load_study(workdir).get_trials(deepcopy=False)
    floor = trials[0].user_attrs["metrics"]["val_accuracy"] - 0.005
    below = {t.number for t in trials if ACCURACY_FROM_ATTR not in t.user_attrs
             and t.user_attrs.get("metrics", {}).get("val_accuracy", 1.0) < floor}
    assert any(trials[n].params["model_pruning.ratio"] == 0.9 for n in below), [t.user_attrs for t in trials]
    assert not [t.number for t in trials if t.user_attrs.get(ACCURACY_FROM_ATTR) in below], \
        [(t.params, t.user_attrs.get(ACCURACY_FROM_ATTR)) for t in trials]


class _Proposes(optuna.samplers.BaseSampler):
    """A joint proposal of the same configuration every time, as the GP late in a sweep re-proposes its incumbent
    (or a fast configuration of settled maths)."""

    def __init__(self, params: dict):
        self.params = params

    def infer_relative_search_space(self, study, trial):
        return dict(SPACE_3)

    def sample_relative(self, study, trial, search_space):
        return dict(self.params)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.params[param_name]


SPACE_3 = {**SPACE, "batch_size": CategoricalDistribution([64, 128, 256])}


@pytest.mark.parametrize("proposed, cheapest", [
    # settled maths (model pruning, below the floor): its nearest unseen configurations are new maths at a larger
    # batch; two changes away, your maths with loader workers is only timed
    ({**BASELINE, "model_pruning.ratio": 0.5}, [{**BASELINE, "loader.num_workers": 1},
                                                {**BASELINE, "loader.num_workers": 2}]),
    # a repeat of maths at the floor: its loader settings are one change away (batch 256 or model pruning too)
    ({**BASELINE, "batch_size": 128}, [{**BASELINE, "batch_size": 128, "loader.num_workers": 1},
                                       {**BASELINE, "batch_size": 128, "loader.num_workers": 2}])],
    ids=["settled", "repeat"])
def test_a_repaired_proposal_takes_the_nearest_configuration_that_is_only_timed(proposed, cheapest) -> None:
    """A repair moves a proposal to the nearest unseen configuration; where one or two changes reach one whose
    maths trained at the floor, it is taken first (staging times it: a third to a half of a full training),
    else (before) one change at random, a new set of maths that trains in full."""
    keys = {configuration_key(p) for p in cheapest}
    for reached in (True, False):
        picked = set()
        for seed in range(6):
            study = optuna.create_study(directions=["maximize", "maximize"], sampler=within_rules(
                _Proposes(proposed), None, seed=seed, settled=below_floor(0.005),
                reached=at_floor(0.005) if reached else None))
            for params, role in ((BASELINE, "baseline"), ({**BASELINE, "batch_size": 128}, "move"),
                                 ({**BASELINE, "model_pruning.ratio": 0.5}, "move")):
                enqueue(study, params, role)
                trial = study.ask(SPACE_3)
                _told(study, trial, _accuracy(trial.params))
            picked.add(configuration_key(study.ask(SPACE_3).params))
        assert (picked <= keys) == reached, picked

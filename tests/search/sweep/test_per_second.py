"""The GP's pick weighs what a configuration would cost (search/sweep/per_second.py).

Real Optuna studies and GPSampler on a small made-up space, staged as the sweep stages it: a configuration
whose maths trained already is only timed (1 s here, against 4 s for a full training) and carries that
training's accuracy. Throughput rises with workers, batch and model pruning; accuracy falls with batch and
model pruning, so the answer is the baseline's maths with 2 workers.
"""
from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.samplers import GPSampler

from search.record import ACCURACY_FROM_ATTR, REPAIRED_ATTR
from search.sweep.baseline import accuracy_floor
from search.sweep.gp_view import _View, gp_view
from search.sweep.no_repeat import configuration_key
from search.sweep.outcome import Scored, tell
from search.sweep.per_second import Known, pick_per_cost, picking
from search.sweep.roles import enqueue
from search.sweep.rule_sampler import within_rules
from search.sweep.settled import at_floor, below_floor
from search.sweep.staging import accuracy_source, maths_key
from search.sweep.trial_cost import TIMED_ONLY_SHARE_PRIOR, timed_only_share

METRICS = ["throughput_samples_per_s", "val_accuracy"]
DIRECTIONS = ["maximize", "maximize"]
SPACE = {"batch_size": CategoricalDistribution([32, 64, 128, 256]),
         "model_pruning.ratio": CategoricalDistribution([0.0, 0.25, 0.5]),
         "loader.num_workers": CategoricalDistribution([0, 1, 2]),
         "parallel.threads": CategoricalDistribution([1, 2])}  # 72 configurations, 12 sets of maths
BASELINE = {"batch_size": 64, "model_pruning.ratio": 0.0, "loader.num_workers": 0, "parallel.threads": 1}
TOLERANCE = 0.005
FULL_S, TIMED_S = 4.0, 1.0


def forbids(params: dict) -> object | None:
    """A made-up rule: 2 loader workers beside 2 threads over-subscribe the 2 cores."""
    return "oversubscribed" if params.get("loader.num_workers") == 2 and params.get("parallel.threads") == 2 else None


def measure(params: dict) -> tuple[float, float]:
    batch, ratio, workers, threads = (params[k] for k in SPACE)
    throughput = 1000.0 * (1 + 0.6 * workers) * (1 + 0.1 * (threads - 1)) * (batch / 64) ** 0.3 * (1 + ratio)
    accuracy = 0.97 - 0.01 * max(0, (batch / 64) - 1) - 0.05 * ratio - (0.01 if batch == 32 else 0.0)
    return throughput, accuracy


def run(study: optuna.Study, trial: optuna.Trial) -> None:
    """As the trial loop runs it: timed only where its maths trained, stamped with what it took."""
    source = accuracy_source(study, trial.params, but=trial.number) if trial.number else None
    throughput, accuracy = measure(trial.params)
    if source is not None:
        trial.set_user_attr(ACCURACY_FROM_ATTR, source)
    for k, v in (("search.launched_unix_s", 0.0), ("search.ended_unix_s", TIMED_S if source is not None else FULL_S)):
        trial.set_user_attr(k, v)
    tell(study, trial, Scored("ok", metrics={METRICS[0]: throughput, METRICS[1]: accuracy},
                              values=[throughput, accuracy]), DIRECTIONS)


def known() -> Known:
    return Known(at_floor(TOLERANCE), below_floor(TOLERANCE), forbids)


def sweep(seed: int, n_trials: int, per_second: bool = True) -> optuna.Study:
    gp = gp_view(GPSampler(seed=seed, n_startup_trials=4), "answer", METRICS, DIRECTIONS, TOLERANCE,
                 same_maths=True, known=known() if per_second else None)
    study = optuna.create_study(directions=DIRECTIONS, sampler=within_rules(
        gp, forbids, seed, settled=below_floor(TOLERANCE), reached=at_floor(TOLERANCE)))
    enqueue(study, BASELINE, "baseline")
    for _ in range(n_trials):
        run(study, study.ask(SPACE))
    return study


@pytest.mark.parametrize("seed", [0, 1])
def test_every_pick_is_unseen_within_the_rules_and_could_be_the_answer(seed: int) -> None:
    """The pick leaves out what has run, what breaks a rule and the maths that trained below the floor, so the
    sampler wrapper repairs none of the GP's proposals."""
    study = sweep(seed, 16)
    trials = study.get_trials()
    keys = [configuration_key(t.params) for t in trials]
    assert len(set(keys)) == len(keys)  # no repeat
    assert all(forbids(t.params) is None for t in trials)
    for t in trials[5:]:  # the baseline and 4 random start-up trials before: the GP's proposals
        assert REPAIRED_ATTR not in t.user_attrs, t.user_attrs[REPAIRED_ATTR]
        before = optuna.create_study(directions=DIRECTIONS)
        before.add_trials(trials[:t.number])
        assert maths_key(t.params) not in {maths_key(p.params) for p in trials[:t.number]
                                           if p.values[1] < accuracy_floor(before, TOLERANCE)
                                           and ACCURACY_FROM_ATTR not in p.user_attrs}


def test_the_pick_takes_the_gp_acquisition_apart_and_optuna_calls_it() -> None:
    """Optuna's GPSampler still optimises its acquisition through `_optimize_acqf`, a LogCEI for one trial at a
    time with the floor as its last constraint; the pick answers with a configuration, and the sampler's own
    method is back afterwards. When Optuna changes this, this test says so (the pick would quietly not apply)."""
    study = sweep(0, 8)
    gp = study.sampler.base.base  # the rules' wrapper, the GP's view, the GP
    picked = []
    pick = pick_per_cost(study, {}, {}, known())  # the choices shown as they are (no ranks)

    def recorded(acqf):
        picked.append((type(acqf).__name__, pick(acqf)))
        return picked[-1][1]

    trial = study.ask()
    with picking(gp, recorded):
        proposal = gp.sample_relative(_View(study, {}, accuracy_floor(study, TOLERANCE), 0, 1, same_maths=True),
                                      trial._cached_frozen_trial, SPACE)
    assert [name for name, _ in picked] == ["LogCEI"] and picked[0][1] is not None
    assert configuration_key(proposal) not in {configuration_key(t.params) for t in study.get_trials()[:-1]}
    assert "_optimize_acqf" not in vars(gp)  # the class's method again


def test_the_cost_decides_between_a_timed_only_configuration_and_new_maths() -> None:
    """The same study, its timed-only runs 1 s against 4 s trainings or as long as a training: in the first the
    pick is an unseen configuration of maths that trained at the floor (only timed, certain to reach it), in the
    second new maths (model pruning 0.5), where the GP expects more. Seed 3 of this made-up space, 6 trials,
    is a study where the two differ (the pick is the same in 15 of the 18 checked, seeds 0-5 at 6, 8, 10)."""
    study = sweep(3, 6, per_second=False)
    gp = study.sampler.base.base
    picks = []
    for timed_s in (TIMED_S, FULL_S):
        same = optuna.create_study(directions=DIRECTIONS)
        for t in study.get_trials():
            if ACCURACY_FROM_ATTR in t.user_attrs:
                t.user_attrs["search.ended_unix_s"] = timed_s
            same.add_trial(t)
        trial = same.ask()
        with picking(gp, pick_per_cost(same, {}, {}, known())):
            picks.append(gp.sample_relative(_View(same, {}, accuracy_floor(same, TOLERANCE), 0, 1, same_maths=True),
                                            trial._cached_frozen_trial, SPACE))
    cheap, full = picks
    assert maths_key(cheap) == maths_key(BASELINE)  # your maths, only timed
    assert maths_key(full) != maths_key(BASELINE) and full["model_pruning.ratio"] == 0.5


def test_a_timed_only_run_s_share_is_measured_on_the_study_once_it_has_one_of_each() -> None:
    study = optuna.create_study(directions=DIRECTIONS)
    enqueue(study, BASELINE, "baseline")
    run(study, study.ask(SPACE))
    assert timed_only_share(study) == TIMED_ONLY_SHARE_PRIOR  # a full training, no timed-only run yet
    study.enqueue_trial({**BASELINE, "loader.num_workers": 1})
    run(study, study.ask(SPACE))  # your maths again: only timed
    assert timed_only_share(study) == pytest.approx(TIMED_S / FULL_S)

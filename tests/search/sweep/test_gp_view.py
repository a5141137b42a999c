"""The GP sees numeric choices in order and, after the baseline, the answer's question (search/sweep/gp_view.py).

Real Optuna studies and GPSampler on a small made-up grid whose answer lies in
the middle: throughput rises with `width`, accuracy falls past width 5.
"""
from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.samplers import GPSampler, TPESampler

from search.record import ROLE_ATTR
from search.sweep.gp_view import GPView, _View, gp_view
from search.sweep.baseline import accuracy_floor
from search.sweep.outcome import Scored, tell
from search.sweep.roles import enqueue
from search.sweep.rule_sampler import RuleAwareSampler
from conftest import cli_env

METRICS = ["throughput_samples_per_s", "val_accuracy"]
DIRECTIONS = ["maximize", "maximize"]
SPACE = {"width": CategoricalDistribution(list(range(1, 11))), "depth": CategoricalDistribution([1, 2, 3, 4])}
BASELINE = {"width": 2, "depth": 2}


def measure(params: dict) -> Scored:
    """Throughput grows with width and shrinks with depth; accuracy holds to width 5, then drops."""
    width, depth = params["width"], params["depth"]
    throughput = 100.0 * width / depth
    accuracy = 0.95 - (0.02 * (width - 5) if width > 5 else 0.0) - 0.001 * depth
    return Scored("ok", metrics={METRICS[0]: throughput, METRICS[1]: accuracy}, values=[throughput, accuracy])


def sweep(sampler: optuna.samplers.BaseSampler, n_trials: int) -> optuna.Study:
    study = optuna.create_study(directions=DIRECTIONS, sampler=RuleAwareSampler(sampler, lambda p: None, 0))
    enqueue(study, BASELINE, "baseline")
    for _ in range(n_trials):
        trial = study.ask(SPACE)
        tell(study, trial, measure(trial.params), DIRECTIONS)
    return study


def test_the_sampler_sees_throughput_alone_and_the_floor_as_one_more_constraint():
    study = sweep(TPESampler(seed=0), 3)
    floor = accuracy_floor(study, 0.005)
    assert floor == pytest.approx(0.95 - 0.002 - 0.005)  # the baseline's accuracy minus the tolerance
    view = _View(study, {}, floor, 0, 1)
    for shown, trial in zip(view.get_trials(), study.get_trials()):
        assert shown.values == [trial.values[0]]
        assert list(shown.constraints.values()) == [*trial.constraints.values(), floor - trial.values[1]]
    assert study.get_trials()[1].values == list(measure(study.get_trials()[1].params).values)  # the study as it was
    assert [d.name for d in view.directions] == ["MAXIMIZE"]


def test_a_stopped_trial_is_shown_slow_with_its_feasibility_unknown():
    """Told to the study as infeasible at the worst accuracy seen (no report takes it for an answer), it is
    shown to the GP as what the probe measured: its throughput, its constraints at the boundary."""
    study = sweep(TPESampler(seed=0), 3)
    study.set_user_attr("search.objectives", METRICS)  # as the sweep names them
    trial = study.ask(SPACE)
    stopped = Scored("stopped_early", metrics={METRICS[0]: 50.0, "probe_throughput_samples_per_s": 50.0})
    trial.set_user_attr("outcome", "stopped_early")
    tell(study, trial, stopped, DIRECTIONS)
    told = study.trials[-1]
    assert told.values[0] == 50.0 and any(v > 0 for v in told.constraints.values())  # infeasible in the study
    floor = accuracy_floor(study, 0.005)
    shown = _View(study, {}, floor, 0, 1).get_trials()[-1]
    assert shown.values == [50.0] and all(v == 0.0 for v in shown.constraints.values())
    as_told = _View(study, {}, floor, 0, 1, stopped_unknown=False).get_trials()[-1]
    assert any(v > 0 for v in as_told.constraints.values())


def test_only_gp_is_wrapped_and_the_answer_only_when_both_metrics_are_maximised():
    gp = GPSampler(seed=0)
    assert gp_view(gp, "answer", METRICS, DIRECTIONS, 0.005)._floor is not None
    assert gp_view(gp, "front", METRICS, DIRECTIONS, 0.005)._floor is None  # choices in order, both values
    assert gp_view(gp, "answer", METRICS, ["maximize", "minimize"], 0.005)._floor is None
    assert gp_view(gp, "answer", ["val_loss"], ["minimize"], 0.005)._floor is None
    assert isinstance(gp_view(gp, "front", METRICS, DIRECTIONS, 0.005), GPView)
    tpe = TPESampler(seed=0)
    assert gp_view(tpe, "answer", METRICS, DIRECTIONS, 0.005) is tpe
    study = optuna.create_study(directions=DIRECTIONS)
    assert accuracy_floor(study, 0.005) is None  # no baseline yet: the GP sees both values


def test_numeric_choices_are_shown_as_their_ranks_and_proposals_come_back_as_choices():
    study = sweep(TPESampler(seed=0), 6)
    ranks = {"width": list(range(1, 11)), "depth": [1, 2, 3, 4]}
    view = _View(study, ranks, None, -1, -1)
    for shown, trial in zip(view.get_trials(), study.get_trials()):
        assert shown.params == {"width": trial.params["width"] - 1, "depth": trial.params["depth"] - 1}
        assert shown.values == trial.values  # no floor: both values
    sampler = gp_view(GPSampler(seed=0, n_startup_trials=5), "answer", METRICS, DIRECTIONS, 0.005)
    proposal = sampler.sample_relative(study, study.ask()._cached_frozen_trial, SPACE)
    assert proposal["width"] in SPACE["width"].choices and proposal["depth"] in SPACE["depth"].choices


def test_searching_for_the_answer_finds_it_in_the_middle_of_the_range():
    """The answer is width 5 at depth 1 (the fastest at the floor), in the middle of width's range.
    Measured with these seeds: trials 5, 5, 7 (the first 5 are the baseline and random start-up); with
    the choices shown as unrelated categories (the floor shown too): 13, not within 14, 9."""
    found = []
    for seed in range(3):
        study = sweep(gp_view(GPSampler(seed=seed, n_startup_trials=5), "answer", METRICS, DIRECTIONS, 0.005), 10)
        hits = [t.number for t in study.trials if t.params == {"width": 5, "depth": 1}]
        found.append(hits[0] if hits else None)
    assert all(n is not None for n in found), found


def test_a_stopped_trial_whose_maths_trained_is_shown_with_that_accuracy():
    """Our trials' speed-only knobs (loader.num_workers) leave the maths as it is: a trial stopped early whose
    maths trained to the end is shown with that run's accuracy (its other constraints at the boundary); for
    trials that are not ours (same_maths off), every constraint at the boundary, as before."""
    space = {"batch_size": CategoricalDistribution([64, 128]), "loader.num_workers": CategoricalDistribution([0, 2])}
    study = optuna.create_study(directions=DIRECTIONS)
    study.set_user_attr("search.objectives", METRICS)

    def run(params: dict, scored: Scored, **attrs) -> None:
        study.enqueue_trial(params, user_attrs={"outcome": scored.outcome, "metrics": scored.metrics, **attrs})
        tell(study, study.ask(space), scored, DIRECTIONS)

    def ok(throughput: float, accuracy: float) -> Scored:
        return Scored("ok", metrics={METRICS[0]: throughput, METRICS[1]: accuracy}, values=[throughput, accuracy])

    stopped = Scored("stopped_early", metrics={METRICS[0]: 50.0, "probe_throughput_samples_per_s": 50.0})
    run({"batch_size": 64, "loader.num_workers": 0}, ok(100.0, 0.95), **{ROLE_ATTR: "baseline"})
    run({"batch_size": 128, "loader.num_workers": 2}, ok(300.0, 0.80))
    run({"batch_size": 128, "loader.num_workers": 0}, stopped)  # its maths trained (0.80): below the floor
    floor = accuracy_floor(study, 0.005)
    shown = _View(study, {}, floor, 0, 1, same_maths=True).get_trials()[-1]
    assert list(shown.constraints.values())[-1] == pytest.approx(floor - 0.80)
    assert all(v == 0.0 for v in list(shown.constraints.values())[:-1])
    assert all(v == 0.0 for v in _View(study, {}, floor, 0, 1).get_trials()[-1].constraints.values())  # not ours


def test_the_gp_asks_on_one_torch_thread_and_leaves_the_setting_as_it_was():
    """Optuna's GPSampler limits torch's threads in its fit and its acquisition's optimisation only; the view's
    whole ask runs on one (search/sweep/gp_view.py one_torch_thread), and torch's setting is as it was after."""
    import torch

    class Seeing(GPSampler):  # a real GPSampler that notes torch's threads when it is asked
        threads: list[int] = []

        def sample_relative(self, study, trial, search_space):
            self.threads.append(torch.get_num_threads())
            return super().sample_relative(study, trial, search_space)

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        study = sweep(gp_view(Seeing(seed=0, n_startup_trials=3), "answer", METRICS, DIRECTIONS, 0.005), 6)
        assert torch.get_num_threads() == 2
        assert len(Seeing.threads) >= 3 and set(Seeing.threads) == {1}, Seeing.threads
        assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    finally:
        torch.set_num_threads(before)


def test_the_one_thread_limit_never_imports_torch():
    """The first trial's asks (nothing to fit yet) must not pay torch's import in the sweep's process."""
    import subprocess
    import sys

    code = ("import sys; from search.sweep.gp_view import one_torch_thread\n"
            "with one_torch_thread(): pass\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env())
    assert done.returncode == 0 and done.stdout.split() == ["False"], done.stdout + done.stderr

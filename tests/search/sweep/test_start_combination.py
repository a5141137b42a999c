"""After the start design, the moves that paid are combined one at a time (search/sweep/start_combination.py)."""
from __future__ import annotations

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from conftest import TESTS, pythonpath, run_search
from search.record import COMBINED_ATTR, HALFWAY_ATTR, ROLE_ATTR, SEED_ATTR, START_ATTR
from search.sweep.start_combination import enqueue_next, next_combination, next_halfway
from sweep_results import load_study

DISTS = {"batch_size": CategoricalDistribution([64, 128]), "workers": CategoricalDistribution([0, 2]),
         "threads": CategoricalDistribution([1, 2]), "bf16": CategoricalDistribution([False, True])}
BASE = {"batch_size": 64, "workers": 0, "threads": 1, "bf16": False}
FLOOR = 0.895  # the baseline's 0.90 less a tolerance of 0.005


def _add(study: optuna.Study, params: dict, speed: float, accuracy: float | None, outcome: str = "ok",
         **attrs) -> None:
    metrics = {"throughput_samples_per_s": speed} if outcome == "ok" else {"probe_throughput_samples_per_s": speed}
    if accuracy is not None:
        metrics["val_accuracy"] = accuracy
    study.add_trial(create_trial(params={**BASE, **params}, distributions=DISTS, values=[speed, accuracy or 0.0],
                                 user_attrs={"outcome": outcome, "metrics": metrics, **attrs}))


def _started() -> optuna.Study:
    """Your configuration at 1000 samples/s; workers 2x, threads 1.3x, batch 128 1.8x but below the floor, bf16
    stopped early with a probe at 1.1x (its accuracy unknown)."""
    study = optuna.create_study(directions=["maximize", "maximize"])
    _add(study, {}, 1000.0, 0.90, **{ROLE_ATTR: "baseline"})
    _add(study, {"batch_size": 128}, 1800.0, 0.85, **{START_ATTR: "batch_size"})
    _add(study, {"workers": 2}, 2000.0, 0.90, **{START_ATTR: "workers"})
    _add(study, {"threads": 2}, 1300.0, 0.90, **{START_ATTR: "threads"})
    _add(study, {"bf16": True}, 1100.0, None, outcome="stopped_early", **{START_ATTR: "bf16"})
    return study


def test_the_fastest_move_that_held_the_accuracy_gets_the_next_one_added():
    study = _started()
    assert next_combination(study.trials, FLOOR) == (["workers", "threads"], {**BASE, "workers": 2, "threads": 2})
    assert next_combination(study.trials, None) is None  # the floor not known yet: nothing to combine against


def test_a_combination_that_did_not_pay_is_dropped_and_the_next_move_tried_then_none_is_left():
    study = _started()
    _add(study, {"workers": 2, "threads": 2}, 1500.0, 0.90, **{COMBINED_ATTR: "workers,threads"})  # slower together
    assert next_combination(study.trials, FLOOR) == (["workers", "bf16"], {**BASE, "workers": 2, "bf16": True})
    _add(study, {"workers": 2, "bf16": True}, 2300.0, 0.899, **{COMBINED_ATTR: "workers,bf16"})
    assert next_combination(study.trials, FLOOR) is None  # every paying move tried; batch 128 never (below the floor)


def test_a_combination_below_the_floor_does_not_pay_and_one_still_waiting_holds_the_next():
    study = _started()
    study.enqueue_trial({**BASE, "workers": 2, "threads": 2}, user_attrs={COMBINED_ATTR: "workers,threads"})
    assert next_combination(study.trials, FLOOR) is None and enqueue_next(study, FLOOR) is None
    trial = study.ask(DISTS)
    trial.set_user_attr("outcome", "ok")
    trial.set_user_attr("metrics", {"throughput_samples_per_s": 2600.0, "val_accuracy": 0.80})
    study.tell(trial, [2600.0, 0.80])
    line = enqueue_next(study, FLOOR)
    assert line == "start: the moves that paid, combined: workers=2, bf16=True"  # the setting named once, at the first
    [waiting] = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert waiting.user_attrs[COMBINED_ATTR] == "workers,bf16"


def test_fewer_than_two_paying_moves_or_a_start_move_still_to_run_combine_nothing():
    study = optuna.create_study(directions=["maximize", "maximize"])
    _add(study, {}, 1000.0, 0.90, **{ROLE_ATTR: "baseline"})
    _add(study, {"workers": 2}, 2000.0, 0.90, **{START_ATTR: "workers"})
    _add(study, {"threads": 2}, 900.0, 0.90, **{START_ATTR: "threads"})  # slower than yours: did not pay
    assert next_combination(study.trials, FLOOR) is None
    study.enqueue_trial({**BASE, "bf16": True}, user_attrs={START_ATTR: "bf16"})
    assert next_combination(study.trials, FLOOR) is None


def test_a_move_pays_against_the_median_of_every_run_of_yours_the_second_seed_too():
    """Your configuration ran at 715 and 1,155 samples/s (its second run at seed + 1: the seed moves the maths'
    draws, not the speed): a move at 800 was faster than the first run only, and does not pay."""
    study = optuna.create_study(directions=["maximize", "maximize"])
    _add(study, {}, 715.0, 0.90, **{ROLE_ATTR: "baseline"})
    _add(study, {}, 1155.0, 0.91, **{ROLE_ATTR: "baseline", SEED_ATTR: 1})
    _add(study, {"workers": 2}, 1500.0, 0.90, **{START_ATTR: "workers"})
    _add(study, {"threads": 2}, 800.0, 0.90, **{START_ATTR: "threads"})
    assert next_combination(study.trials, FLOOR) is None  # one move paid: nothing to combine
    _add(study, {"bf16": True}, 1000.0, 0.90, **{START_ATTR: "bf16"})  # faster than the median, 935
    assert next_combination(study.trials, FLOOR) == (["workers", "bf16"], {**BASE, "workers": 2, "bf16": True})


def test_a_sweep_combines_the_moves_that_paid_after_its_start(workdir):
    """Batch 128 is 2x your configuration and parallel.threads=2 1.6x, both at your accuracy (paced objective):
    after the two moves, the next trial is the two together."""
    env = {"PYTHONPATH": pythonpath(TESTS.parent, TESTS)}
    result = run_search("multirun", "objective=custom", "objective.callable=paced_objective:seed_sensitive",
                        "hydra.sweeper.params=null", "batch_size=choice(64,128)", "parallel.threads=choice(1,2)",
                        "hydra.sweeper.seed=0", "hydra.sweeper.n_trials=4", "hydra.sweeper.baseline_repeats=1",
                        "hydra.sweeper.confirm_budget=0", "hydra.sweeper.study_name=combined", cwd=workdir, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "start: the moves that paid, combined: batch_size=128, parallel.threads=2" in " ".join(result.stdout.split())
    trials = load_study(workdir, "combined").get_trials(deepcopy=False)
    assert [t.user_attrs.get(START_ATTR) for t in trials[:3]] == [None, "parallel.threads", "batch_size"]
    assert trials[3].params == {"batch_size": 128, "parallel.threads": 2}
    assert trials[3].user_attrs[COMBINED_ATTR] == "batch_size,parallel.threads"
    assert trials[3].user_attrs["outcome"] == "ok"


def test_a_sweep_takes_a_move_too_far_halfway_back_then_combines_it(workdir):
    """Model pruning 0.9 is 2.8x your configuration but 10 points less accurate, 0.5 2x at your accuracy,
    parallel.threads=2 1.3x (paced objective): after the two moves, 0.5 runs halfway back, then with threads."""
    env = {"PYTHONPATH": pythonpath(TESTS.parent, TESTS)}
    result = run_search("multirun", "objective=custom", "objective.callable=paced_objective:pruned_too_far",
                        "hydra.sweeper.params=null", "model_pruning.ratio=choice(0.0,0.5,0.9)",
                        "parallel.threads=choice(1,2)", "hydra.sweeper.seed=0", "hydra.sweeper.n_trials=5",
                        "hydra.sweeper.baseline_repeats=1", "hydra.sweeper.confirm_budget=0",
                        "hydra.sweeper.study_name=halfway", cwd=workdir, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    said = " ".join(result.stdout.split())
    assert ("start: model_pruning.ratio=0.5, halfway back from a move that was faster than yours and fell below "
            "your accuracy") in said
    assert "start: the moves that paid, combined: model_pruning.ratio=0.5, parallel.threads=2" in said
    trials = load_study(workdir, "halfway").get_trials(deepcopy=False)
    assert [t.params for t in trials] == [{"model_pruning.ratio": r, "parallel.threads": n}
                                          for r, n in ((0.0, 1), (0.0, 2), (0.9, 1), (0.5, 1), (0.5, 2))]
    assert [t.user_attrs.get(START_ATTR) for t in trials[1:3]] == ["parallel.threads", "model_pruning.ratio"]
    assert trials[3].user_attrs[HALFWAY_ATTR] == "model_pruning.ratio"
    assert trials[4].user_attrs[COMBINED_ATTR] == "model_pruning.ratio,parallel.threads"
    assert all(t.user_attrs["outcome"] == "ok" for t in trials)


def test_a_move_faster_but_below_the_floor_is_taken_halfway_back_once_then_it_is_a_move_like_the_others():
    dists = {"ratio": CategoricalDistribution([0.0, 0.25, 0.5, 0.75]), "workers": CategoricalDistribution([0, 2])}
    base = {"ratio": 0.0, "workers": 0}
    study = optuna.create_study(directions=["maximize", "maximize"])

    def add(params, speed, accuracy, **attrs):
        study.add_trial(create_trial(params={**base, **params}, distributions=dists, values=[speed, accuracy],
                                     user_attrs={"outcome": "ok", "metrics": {"throughput_samples_per_s": speed,
                                                                              "val_accuracy": accuracy}, **attrs}))

    add({}, 1000.0, 0.90, **{ROLE_ATTR: "baseline"})
    add({"ratio": 0.75}, 1400.0, 0.85, **{START_ATTR: "ratio"})  # faster, below the floor
    add({"workers": 2}, 1800.0, 0.90, **{START_ATTR: "workers"})
    line = enqueue_next(study, FLOOR, None, dists)
    assert line == "start: ratio=0.5, halfway back from a move that was faster than yours and fell below your accuracy"
    trial = study.ask(dists)
    assert trial.params == {"ratio": 0.5, "workers": 0} and trial.user_attrs[HALFWAY_ATTR] == "ratio"
    for k, v in (("outcome", "ok"), ("metrics", {"throughput_samples_per_s": 1300.0, "val_accuracy": 0.897})):
        trial.set_user_attr(k, v)
    study.tell(trial, [1300.0, 0.897])
    assert next_halfway(study.trials, FLOOR, dists) is None  # once
    assert next_combination(study.trials, FLOOR) == (["workers", "ratio"], {"ratio": 0.5, "workers": 2})


def test_halfway_is_the_middle_of_the_values_as_the_gp_sees_them():
    from optuna.distributions import FloatDistribution, IntDistribution

    from search.sweep.start_combination import _halfway

    assert _halfway(CategoricalDistribution([16, 32, 64, 128, 256]), 64, 256) == 128
    assert _halfway(CategoricalDistribution([0.0, 0.25, 0.5, 0.75]), 0.0, 0.75) == 0.5
    assert _halfway(CategoricalDistribution([64, 128]), 64, 128) is None  # none between
    assert _halfway(CategoricalDistribution(["fp32", "bf16"]), "fp32", "bf16") is None
    assert abs(_halfway(FloatDistribution(1e-4, 1e-1, log=True), 1e-3, 1e-1) - 1e-2) < 1e-12
    assert _halfway(IntDistribution(16, 256, step=16), 64, 256) == 160
    assert _halfway(IntDistribution(1, 4), 1, 2) is None


def test_a_combination_is_a_proposal_early_stopping_and_staging_apply():
    """Enqueued, yet in the sampler's place: not measured as asked like your configuration's runs (seen: a
    combination of two speed-only moves trained in full, where the sweep times it)."""
    from search.sweep.roles import enqueued_as_asked

    study = optuna.create_study(directions=["maximize", "maximize"])
    for attrs in ({COMBINED_ATTR: "workers,threads"}, {HALFWAY_ATTR: "batch_size"}, {ROLE_ATTR: "baseline"}):
        study.enqueue_trial(BASE, user_attrs=attrs)
    asked = [enqueued_as_asked(study, study.ask(DISTS)) for _ in range(3)]
    assert asked == [False, False, True]


def test_a_move_faster_than_yours_but_stopped_early_is_taken_halfway_back_too():
    """The speed-only moves run first and raise early stopping's bar, so a move that went too far is often stopped
    at its probe before its accuracy is known (replayed on digits_long_grid: batch 256 stopped, 128 the answer's
    batch); the gentler value gets its own probe, and joins the combination like any move that paid."""
    dists = {"ratio": CategoricalDistribution([0.0, 0.25, 0.5, 0.75]), "workers": CategoricalDistribution([0, 2])}
    base = {"ratio": 0.0, "workers": 0}
    study = optuna.create_study(directions=["maximize", "maximize"])
    for params, speed, accuracy, attrs in (({}, 1000.0, 0.90, {ROLE_ATTR: "baseline"}),
                                           ({"workers": 2}, 1800.0, 0.90, {START_ATTR: "workers"}),
                                           ({"ratio": 0.75}, 1400.0, None, {START_ATTR: "ratio"})):
        stopped = accuracy is None
        metrics = {"probe_throughput_samples_per_s" if stopped else "throughput_samples_per_s": speed,
                   **({} if stopped else {"val_accuracy": accuracy})}
        study.add_trial(create_trial(params={**base, **params}, distributions=dists, values=[speed, accuracy or 0.0],
                                     user_attrs={"outcome": "stopped_early" if stopped else "ok", "metrics": metrics,
                                                 **attrs}))
    assert next_halfway(study.trials, FLOOR, dists, from_stopped=False) is None  # before: measured moves only
    line = enqueue_next(study, FLOOR, None, dists)
    assert line == ("start: ratio=0.5, halfway back from a move that was faster than yours and stopped early, "
                    "slower than the fastest at your accuracy, its own accuracy unknown")
    assert study.ask(dists).params == {"ratio": 0.5, "workers": 0}


def test_two_workers_enqueueing_the_same_combination_run_it_once():
    """Whichever worker proposes next enqueues the next combination, so two workers of one study may both enqueue
    it at the same moment (check, then enqueue); the later twin is closed as skipped when it is popped, before
    any training, and the worker asks again."""
    import random

    from search.record import REPEAT_ATTR
    from search.sweep.no_repeat import ask_unseen

    study = optuna.create_study(directions=["maximize", "maximize"])
    twin = {**BASE, "workers": 2, "threads": 2}
    for _ in range(2):  # worker A's and worker B's
        study.enqueue_trial(twin, user_attrs={COMBINED_ATTR: "workers,threads"}, skip_if_exists=False)
    first = ask_unseen(study, DISTS, random.Random(0))  # one worker pops the first; it runs
    assert first.params == twin and first.user_attrs[COMBINED_ATTR] == "workers,threads"
    other = ask_unseen(study, DISTS, random.Random(0))  # the other pops the second while the first runs
    skipped = study.trials[1]
    assert skipped.state == TrialState.FAIL and skipped.user_attrs["outcome"] == "skipped"
    assert skipped.user_attrs[REPEAT_ATTR] == first.number and "another worker" in skipped.user_attrs["reason"]
    # the sampler's proposal instead (another unseen one in its place when it draws the twin's configuration)
    assert COMBINED_ATTR not in other.user_attrs and other.params != twin
    assert [t.params for t in study.get_trials(states=(TrialState.RUNNING,))].count(twin) == 1

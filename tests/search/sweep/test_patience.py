"""The search's patience (search/sweep/patience.py): it ends once the sampler's own proposals stop making the
answer faster beyond noise."""
from __future__ import annotations

import time

import optuna
from optuna.distributions import CategoricalDistribution

from conftest import TESTS, pythonpath, run_search
from search.record import ROLE_ATTR, START_ATTR
from search.sweep.patience import search_ended, stale_proposals
from sweep_results import load_study

DISTS = {"x": CategoricalDistribution(list(range(50)))}
FLOOR = 0.895  # your configuration's 0.90 less the tolerance


def _run(study: optuna.Study, speed: float, accuracy: float = 0.90, enqueued: bool = False,
         outcome: str = "ok", **attrs) -> None:
    """One trial, asked and told as the sweep does: enqueued on purpose (the baseline, a start move) or proposed."""
    if enqueued:
        study.enqueue_trial({"x": len(study.trials)}, user_attrs=attrs)
    trial = study.ask(DISTS)
    metrics = {"throughput_samples_per_s": speed, "val_accuracy": accuracy}
    trial.set_user_attr("outcome", outcome)
    trial.set_user_attr("metrics", metrics)
    for k, v in ({} if enqueued else attrs).items():
        trial.set_user_attr(k, v)
    study.tell(trial, [speed, accuracy])


def _started(base_speeds=(1000.0, 1000.0)) -> optuna.Study:
    """Your configuration's runs, then a start move that makes the answer 1.5x."""
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.RandomSampler(seed=0))
    for speed in base_speeds:
        _run(study, speed, enqueued=True, **{ROLE_ATTR: "baseline"})
    _run(study, 1500.0, enqueued=True, **{START_ATTR: "workers"})
    return study


def test_the_search_ends_after_that_many_proposals_in_a_row_that_did_not_make_the_answer_faster():
    study = _started()
    _run(study, 1400.0)  # slower than the answer
    _run(study, 3000.0, accuracy=0.80)  # faster, below the floor: not an answer
    assert stale_proposals(study, FLOOR, 0.0) == 2
    assert search_ended(study, FLOOR, 3, 0.0) is None
    _run(study, 1600.0)  # faster by 6.7%: within noise (10%)
    line = search_ended(study, FLOOR, 3, 0.0)
    assert line is not None and "last 3 trials" in line and "noise (10%" in line
    assert "hydra.sweeper.patience_trials=3" in line


def test_a_proposal_faster_beyond_noise_starts_the_count_again():
    study = _started()
    _run(study, 1400.0)
    _run(study, 1400.0)
    _run(study, 1700.0)  # 1.13x the answer: progress
    assert stale_proposals(study, FLOOR, 0.0) == 0
    _run(study, 1800.0)  # 1.06x the new answer: not progress
    assert stale_proposals(study, FLOOR, 0.0) == 1


def test_enqueued_trials_do_not_count_but_their_progress_does():
    study = _started()
    _run(study, 1400.0)
    _run(study, 1200.0, enqueued=True, **{START_ATTR: "threads"})  # the start design's: not the sampler's
    assert stale_proposals(study, FLOOR, 0.0) == 1
    _run(study, 2000.0, enqueued=True, **{START_ATTR: "bf16"})  # a start move that made the answer faster
    assert stale_proposals(study, FLOOR, 0.0) == 0


def test_only_proposals_launched_since_this_sweep_started_count():
    """A re-run on a study whose search had ended searches again: the earlier sweep's proposals are not counted."""
    study = _started()
    for _ in range(3):
        _run(study, 1400.0)
    assert search_ended(study, FLOOR, 3, 0.0) is not None
    since = time.time()
    _run(study, 1400.0)
    assert stale_proposals(study, FLOOR, since) == 1
    assert search_ended(study, FLOOR, 3, since) is None


def test_noise_widens_to_the_spread_of_your_configurations_runs():
    study = _started(base_speeds=(1000.0, 800.0))  # 20% apart
    _run(study, 1750.0)  # 1.17x the answer: within this machine's noise
    assert stale_proposals(study, FLOOR, 0.0) == 1
    assert "noise (20%" in search_ended(study, FLOOR, 1, 0.0)


def test_off_without_patience_or_without_a_floor():
    study = _started()
    for _ in range(5):
        _run(study, 1400.0)
    assert search_ended(study, FLOOR, None, 0.0) is None
    assert search_ended(study, None, 3, 0.0) is None


def test_a_sweep_ends_its_search_when_the_proposals_stop_paying_and_still_confirms(workdir):
    """Model pruning 0.5 with parallel.threads=2 is the fastest at your accuracy (paced objective); the learning
    rate changes nothing there. After the start design found it, the GP's proposals only tie it, so the search
    ends after `patience_trials` of them, well before n_trials, and the answer is confirmed."""
    env = {"PYTHONPATH": pythonpath(TESTS.parent, TESTS)}
    result = run_search("multirun", "objective=custom", "objective.callable=paced_objective:pruned_too_far",
                        "hydra.sweeper.params=null", "model_pruning.ratio=choice(0.0,0.5,0.9)",
                        "parallel.threads=choice(1,2)", "optim.lr=choice(0.001,0.002,0.005,0.01)",
                        "hydra.sweeper.seed=0", "hydra.sweeper.n_trials=14", "hydra.sweeper.baseline_repeats=1",
                        "hydra.sweeper.patience_trials=2", "hydra.sweeper.study_name=patience", cwd=workdir, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    said = " ".join(result.stdout.split())
    assert "patience: the search ends once 2 trials the sampler proposed end in a row" in said
    assert "did not make the fastest configuration at your accuracy faster by more than noise" in said
    trials = load_study(workdir, "patience").get_trials(deepcopy=False)
    searched = [t for t in trials if t.user_attrs.get(ROLE_ATTR) not in ("confirm", "seed_check")]
    assert len(searched) < 14
    proposals = [t for t in searched if "fixed_params" not in t.system_attrs]
    assert len(proposals) >= 2  # the sampler had its trials
    assert "the answer" in said and "your configuration" in said  # confirmed: the panel


def test_a_search_without_the_start_design_runs_every_trial(workdir):
    """The GP's own random start-up (start_design=sampler) proposes trials that are not a search's end: the
    patience does not apply, and every trial of n_trials runs."""
    env = {"PYTHONPATH": pythonpath(TESTS.parent, TESTS)}
    result = run_search("multirun", "objective=custom", "objective.callable=paced_objective:pruned_too_far",
                        "hydra.sweeper.params=null", "model_pruning.ratio=choice(0.0,0.5,0.9)",
                        "parallel.threads=choice(1,2)", "optim.lr=choice(0.001,0.002,0.005,0.01)",
                        "hydra.sweeper.seed=0", "hydra.sweeper.n_trials=7", "hydra.sweeper.baseline_repeats=1",
                        "hydra.sweeper.patience_trials=1", "hydra.sweeper.start_design=sampler",
                        "hydra.sweeper.confirm_budget=0", "hydra.sweeper.study_name=nopatience", cwd=workdir, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "patience:" not in result.stdout
    trials = load_study(workdir, "nopatience").get_trials(deepcopy=False)
    assert len([t for t in trials if t.user_attrs.get(ROLE_ATTR) not in ("confirm", "seed_check")]) == 7


def test_patience_does_not_end_the_search_while_a_one_knob_move_from_the_answer_could_beat_it():
    """The sampler's proposals stopped paying, but the answer so far (batch 64, workers 2) has a neighbour not
    measured yet: the search goes on until every one-knob move from it ran or cannot beat it."""
    from optuna.distributions import CategoricalDistribution as C

    from search.sweep.patience import moves_left
    from search.sweep.space import Space

    dists = {"batch_size": C([64, 128]), "loader.num_workers": C([0, 2]), "optim.lr": C([0.001, 0.002])}
    base = {"batch_size": 64, "loader.num_workers": 0, "optim.lr": 0.001}
    study = optuna.create_study(directions=["maximize", "maximize"])

    def add(params: dict, speed: float, accuracy: float | None = 0.90, outcome: str = "ok", **attrs) -> None:
        m = {"throughput_samples_per_s": speed} | ({"val_accuracy": accuracy} if accuracy is not None else {})
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, values=[speed, accuracy or 0],
                                                  user_attrs={"outcome": outcome, "metrics": m, **attrs}))

    add(base, 1000.0, **{ROLE_ATTR: "baseline"})
    add({**base, "loader.num_workers": 2}, 1500.0)  # the answer so far
    for _ in range(3):
        add({**base, "batch_size": 128}, 900.0)  # proposals that did not pay (the same cell: made up)
    space = Space(dists, [])
    left = moves_left(study, FLOOR, space)
    # batch 128 from the answer; not the learning rate alone: the same work runs at the same speed
    assert left == [{"batch_size": 128, "loader.num_workers": 2, "optim.lr": 0.001}]
    assert search_ended(study, FLOOR, 3, 0.0) is not None  # without the space: patience alone
    assert search_ended(study, FLOOR, 3, 0.0, space) is None  # with it: that move first
    add({"batch_size": 128, "loader.num_workers": 2, "optim.lr": 0.001}, 0.0, None, outcome="oom")
    assert moves_left(study, FLOOR, space) == []
    assert "every one-knob move from it has run or cannot beat it" in search_ended(study, FLOOR, 3, 0.0, space)


def test_a_move_whose_maths_trained_below_the_floor_or_whose_smaller_batch_ran_out_of_memory_cannot_beat_it():
    from optuna.distributions import CategoricalDistribution as C

    from search.sweep.patience import moves_left
    from search.sweep.space import Space

    dists = {"batch_size": C([64, 128, 256]), "precision": C(["fp32", "bf16"]), "loader.num_workers": C([0, 2])}
    base = {"batch_size": 64, "precision": "fp32", "loader.num_workers": 0}
    study = optuna.create_study(directions=["maximize", "maximize"])
    for params, speed, acc, outcome in [(base, 1000.0, 0.90, "ok"),
                                        ({**base, "precision": "bf16"}, 1200.0, 0.80, "ok"),  # below the floor
                                        ({**base, "batch_size": 128}, 0.0, None, "oom")]:
        m = {"throughput_samples_per_s": speed} | ({"val_accuracy": acc} if acc is not None else {})
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, values=[speed, acc or 0],
                                                  user_attrs={"outcome": outcome, "metrics": m,
                                                              **({ROLE_ATTR: "baseline"} if params is base else {})}))
    # bf16's maths trained below the floor (staging would score it so); 256 is larger than a batch that did not fit
    assert moves_left(study, FLOOR, Space(dists, [])) == [{**base, "loader.num_workers": 2}]

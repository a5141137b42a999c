"""The start design (search/sweep/start_design.py): after the baseline, a fresh study's first trials move
one knob each from the user's configuration to the far end of its values."""
from __future__ import annotations

import random

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from conftest import run_search
from objectives import Hardware
from objectives.config import parse_values
from search.record import ACCURACY_FROM_ATTR, START_ATTR
from search.sweep.combinations import fit_to_rules
from search.sweep.roles import enqueue, enqueued_as_asked
from search.sweep.space import build_space
from search.sweep.staging import SPEED_ONLY
from search.sweep.start_design import WORK_NEUTRAL, enqueue_start, not_moved_alone, one_knob_at_a_time, start_line
from sweep_results import load_study

TWO_CORES = Hardware(cpu_cores=2, why_no_gpu="none here")
SPACE = {
    "batch_size": CategoricalDistribution([32, 64, 128, 256]),
    "precision": CategoricalDistribution(["fp32", "bf16"]),
    "parallel.devices": CategoricalDistribution([1, 2]),
    "parallel.threads": CategoricalDistribution([1, 2]),
    "optim.lr": FloatDistribution(1e-4, 1e-1, log=True),
    "train.epochs": IntDistribution(1, 10),
    "loader.pin_memory": CategoricalDistribution([False]),
}
BASELINE = {"batch_size": 64, "precision": "fp32", "parallel.devices": 1, "parallel.threads": 1,
            "optim.lr": 1e-3, "train.epochs": 8, "loader.pin_memory": False}


def test_each_knob_moves_alone_to_the_far_end_of_its_values():
    design = dict(one_knob_at_a_time(BASELINE, SPACE, None, random.Random(0)))
    # the speed-only knob first (timed only, at your accuracy: it raises early stopping's bar for the others),
    # then the space's order; a knob with one value cannot move
    assert list(design) == ["parallel.threads", "batch_size", "precision", "parallel.devices", "train.epochs"]
    in_order = dict(one_knob_at_a_time(BASELINE, SPACE, None, random.Random(0), first=frozenset()))
    assert list(in_order) == ["batch_size", "precision", "parallel.devices", "parallel.threads", "train.epochs"]
    moved = {knob: params[knob] for knob, params in design.items()}
    # 64 has one choice below and two above: the top end
    assert moved == {"batch_size": 256, "precision": "bf16", "parallel.devices": 2, "parallel.threads": 2,
                     "train.epochs": 1}
    for knob, params in design.items():
        assert {k for k in params if params[k] != BASELINE[k]} == {knob}


def test_the_learning_rate_is_not_moved_alone_and_the_start_line_says_so():
    """optim.lr changes the maths, not the work a step does: moved alone it runs at your configuration's speed,
    so it can never be the faster configuration the start looks for (replayed on digits_lr_grid and
    digits_long_grid, its two moves were two trials before the answer, never part of it)."""
    assert {"optim.lr", "optim.lr_scaling", "optim.base_batch_size"} <= WORK_NEUTRAL
    assert not WORK_NEUTRAL & SPEED_ONLY
    design = one_knob_at_a_time(BASELINE, SPACE, None, random.Random(0))
    assert "optim.lr" not in dict(design) and not_moved_alone(SPACE) == ["optim.lr"]
    line = start_line(design, len(design), 20, left=not_moved_alone(SPACE))
    assert "; optim.lr not moved alone (the same work at your configuration's speed; the sampler moves it with " \
           "the others); hydra.sweeper.start_design=sampler" in line
    # the geometry is the same for it: lr 1e-3 is nearer 1e-4 on a log scale, so its move is to the top end
    moved = dict(one_knob_at_a_time(BASELINE, SPACE, None, random.Random(0), work_neutral=frozenset()))
    assert moved["optim.lr"]["optim.lr"] == 1e-1


def test_a_knob_whose_move_breaks_a_rule_is_left_to_the_sampler():
    def forbids(params):  # devices * threads <= 2 cores
        return "too many threads" if params["parallel.devices"] * params["parallel.threads"] > 2 else None

    on_two = {**BASELINE, "parallel.threads": 2}
    knobs = [knob for knob, _ in one_knob_at_a_time(on_two, SPACE, forbids, random.Random(0))]
    assert "parallel.devices" not in knobs and "parallel.threads" in knobs


def test_a_choice_that_is_not_a_number_is_drawn_among_those_the_rules_allow():
    """fp8 needs compile other than none: from fp32 with compile=none the precision move is never fp8, so the
    knob always gets its move (before, a draw of fp8 left precision without one)."""
    space = {"precision": CategoricalDistribution(["fp32", "tf32", "bf16", "fp8"]),
             "parallel.compile": CategoricalDistribution(["none", "default"])}

    def forbids(params):
        return "fp8 needs compile" if params["precision"] == "fp8" and params["parallel.compile"] == "none" else None

    base = {"precision": "fp32", "parallel.compile": "none"}
    for seed in range(20):
        moved = [(knob, params[knob]) for knob, params in one_knob_at_a_time(base, space, forbids, random.Random(seed))]
        assert [knob for knob, _ in moved] == ["parallel.compile", "precision"]  # the speed-only knob first
        assert dict(moved)["precision"] in ("tf32", "bf16")


def test_a_baseline_in_the_middle_moves_to_both_ends():
    space = {"batch_size": CategoricalDistribution([32, 64, 128]), "optim.lr": FloatDistribution(1e-3, 1e-1, log=True)}
    design = one_knob_at_a_time({"batch_size": 64, "optim.lr": 1e-2}, space, None, random.Random(0),
                                work_neutral=frozenset())
    assert [(knob, params[knob]) for knob, params in design] == [
        ("batch_size", 32), ("batch_size", 128), ("optim.lr", 1e-3), ("optim.lr", 1e-1)]


def test_a_knob_the_baseline_leaves_without_effect_does_not_move():
    """Persistent workers mean nothing without workers (DataLoader is not given them): moving them alone from
    num_workers=0 would time the baseline again; from num_workers=1 it is a move."""
    space, _ = fit_to_rules(build_space({}, ["loader.num_workers=choice(0,1,2)",
                                             "loader.persistent_workers=choice(false,true)",
                                             "batch_size=choice(32,64)"]), parse_values({}), TWO_CORES)
    base = {"loader.num_workers": 0, "loader.persistent_workers": False, "batch_size": 32}
    moved = [knob for knob, _ in one_knob_at_a_time(base, space.distributions, space.forbids, random.Random(0),
                                                    space.unused)]
    assert moved == ["loader.num_workers", "batch_size"]
    with_workers = {**base, "loader.num_workers": 1}
    moved = [knob for knob, _ in one_knob_at_a_time(with_workers, space.distributions, space.forbids,
                                                    random.Random(0), space.unused)]
    assert moved == ["loader.num_workers", "loader.num_workers", "loader.persistent_workers", "batch_size"]
    # a speed-only knob listed after a maths one in the space still moves first
    later, _ = fit_to_rules(build_space({}, ["batch_size=choice(32,64)", "loader.num_workers=choice(0,1,2)"]),
                            parse_values({}), TWO_CORES)
    moved = [knob for knob, _ in one_knob_at_a_time({"batch_size": 32, "loader.num_workers": 0},
                                                    later.distributions, later.forbids, random.Random(0),
                                                    later.unused)]
    assert moved == ["loader.num_workers", "batch_size"]


@pytest.mark.parametrize("seed", range(4))  # the drawn value of a choice that is not a number, several draws
def test_a_move_to_the_value_auto_already_runs_with_is_never_made(seed):
    """loader.pin_memory: null (conf/config.yaml) is on with a GPU and off without: moved to true on a GPU
    machine, or to either on a CPU one, the baseline would run again under another name."""
    gpu = Hardware(cpu_cores=16, gpu_count=1, compute_capability=(9, 0))
    arguments = ["loader.pin_memory=choice(false,true)", "batch_size=choice(32,64)"]
    base = {"loader.pin_memory": None, "batch_size": 32}
    moves = {}
    for name, hardware in (("gpu", gpu), ("cpu", TWO_CORES)):
        space, _ = fit_to_rules(build_space({}, arguments), parse_values({}), hardware)
        moves[name] = [(knob, params[knob]) for knob, params in one_knob_at_a_time(
            base, space.distributions, space.forbids, random.Random(seed), space.unused, space.resolved)]
    assert moves["gpu"] == [("loader.pin_memory", False), ("batch_size", 64)]
    assert moves["cpu"] == [("batch_size", 64)]


def test_start_trials_are_proposals_the_baseline_is_measured_as_asked():
    study = optuna.create_study(directions=["maximize", "maximize"])
    enqueue(study, dict(BASELINE), "baseline")
    enqueue_start(study, one_knob_at_a_time(BASELINE, SPACE, None, random.Random(0)))
    baseline, start = study.ask(SPACE), study.ask(SPACE)
    assert enqueued_as_asked(study, baseline)  # never stopped early, trained in full
    assert not enqueued_as_asked(study, start)  # early stopping and staging apply
    assert start.user_attrs[START_ATTR] == "parallel.threads" and start.params["parallel.threads"] == 2


def test_the_start_line_says_which_moves_wait_for_the_next_sweep_when_n_trials_is_short():
    design = one_knob_at_a_time(BASELINE, SPACE, None, random.Random(0))
    assert "next sweep" not in start_line(design, len(design), 20)
    line = start_line(design, 1, 3)  # n_trials=3 after the baseline's two runs
    assert line.startswith(f"start: {len(design)} trial(s), each moving one knob from your configuration (")
    assert f"; 1 fit in hydra.sweeper.n_trials=3 after your configuration's runs, the other {len(design) - 1} " \
           f"run first in this study's next sweep; hydra.sweeper.start_design=sampler" in line
    # a night is a study of its own: the next night never runs them (a user pass saw every night run the same two)
    night = start_line(design, 1, 3, nightly=True)
    assert "next sweep" not in night and f"the other {len(design) - 1} run only if this night is run again (each " \
        "night is a new study: a larger hydra.sweeper.n_trials runs them tonight)" in night


def test_a_fresh_study_starts_one_knob_at_a_time_and_a_rerun_does_not_again(workdir):
    args = ["multirun", "hydra.sweeper.params=null", "batch_size=choice(64,128)", "loader.num_workers=choice(0,1)",
            "precision=choice(fp32,bf16)", "train.budget_samples=800", "hydra.sweeper.n_trials=4",
            "hydra.sweeper.baseline_repeats=1", "hydra.sweeper.confirm_budget=0", "hydra.sweeper.seed=0"]
    result = run_search(*args, cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ("start: 3 trial(s), each moving one knob from your configuration (loader.num_workers=1, "
            "batch_size=128, precision=bf16)") in " ".join(result.stdout.split())
    trials = load_study(workdir).get_trials(deepcopy=False)
    base = trials[0].params
    assert [t.user_attrs.get(START_ATTR) for t in trials[:4]] == [None, "loader.num_workers", "batch_size",
                                                                  "precision"]
    for t in trials[1:4]:
        assert {k for k in t.params if t.params[k] != base[k]} == {t.user_attrs[START_ATTR]}
    workers = trials[1]  # a speed-only knob, first: timed only, with the baseline's accuracy, never stopped early
    assert workers.user_attrs.get(ACCURACY_FROM_ATTR) == 0 and workers.user_attrs["outcome"] == "ok"

    again = run_search(*args[:-4], "hydra.sweeper.n_trials=1", "hydra.sweeper.baseline_repeats=1",
                       "hydra.sweeper.confirm_budget=0", "hydra.sweeper.seed=0", cwd=workdir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "each moving one knob" not in again.stdout  # (the moves that paid may be combined now: another line)
    assert sum(START_ATTR in t.user_attrs for t in load_study(workdir).trials) == 3


def test_moves_past_n_trials_wait_on_the_study_not_as_trials_and_run_first_in_its_next_sweep(workdir):
    """n_trials=2 leaves room for one of three moves after the baseline: the other two are kept on the
    study, so the confirmation finds no waiting trial to close (before: two failed trials that never ran,
    in optuna-dashboard and every listing of the study), and the next sweep runs them first."""
    from search.record import DEFERRED_ATTR

    args = ["multirun", "hydra.sweeper.params=null", "batch_size=choice(64,128)", "loader.num_workers=choice(0,1)",
            "precision=choice(fp32,bf16)", "train.budget_samples=800", "hydra.sweeper.baseline_repeats=1",
            "hydra.sweeper.seed=0"]
    first = run_search(*args, "hydra.sweeper.n_trials=2", cwd=workdir)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "1 fit in hydra.sweeper.n_trials=2 after your configuration's runs, the other 2 run first" \
        in " ".join(first.stdout.split())  # the line is wrapped at the width
    study = load_study(workdir)
    states = {t.state for t in study.get_trials(deepcopy=False)}
    assert states == {TrialState.COMPLETE}, [(t.number, t.state, t.user_attrs.get("reason")) for t in study.trials]
    assert [t.user_attrs.get(START_ATTR) for t in study.trials[:2]] == [None, "loader.num_workers"]
    deferred = study._storage.get_study_system_attrs(study._study_id)[DEFERRED_ATTR]
    assert [knob for knob, _ in deferred] == ["batch_size", "precision"]

    again = run_search(*args, "hydra.sweeper.n_trials=2", "hydra.sweeper.confirm_budget=0", cwd=workdir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert ("start: 2 move(s) an earlier sweep of this study had no room for run first "
            "(batch_size=128, precision=bf16)") in " ".join(again.stdout.split())
    study = load_study(workdir)
    ran = [t.user_attrs.get(START_ATTR) for t in study.get_trials(deepcopy=False) if START_ATTR in t.user_attrs]
    assert ran == ["loader.num_workers", "batch_size", "precision"]
    assert study._storage.get_study_system_attrs(study._study_id)[DEFERRED_ATTR] == []
    assert {t.state for t in study.get_trials(deepcopy=False)} == {TrialState.COMPLETE}


@pytest.mark.parametrize("start", [["hydra.sweeper.start_design=sampler"],
                                   ["hydra/sweeper/sampler=tpe"],  # replayed, TPE did better from its own start
                                   # not the answer's question: a baseline, but no accuracy to hold
                                   ["hydra.sweeper.metrics=[throughput_samples_per_s]",
                                    "hydra.sweeper.direction=[maximize]"]],
                         ids=["start_design=sampler", "tpe", "throughput alone"])
def test_the_sampler_keeps_its_own_start(workdir, start):
    result = run_search("multirun", "hydra.sweeper.params=null", "batch_size=choice(64,128)",
                        "train.budget_samples=600", "hydra.sweeper.n_trials=1", "hydra.sweeper.baseline_repeats=1",
                        "hydra.sweeper.confirm_budget=0", *start, cwd=workdir)  # the start is decided before trial 0
    assert result.returncode == 0, result.stderr[-3000:]
    assert "start:" not in result.stdout
    assert not any(START_ATTR in t.user_attrs for t in load_study(workdir).trials)
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    [sweep_run] = client.search_runs([e.experiment_id for e in client.search_experiments()],
                                     "tags.`search.role` = 'sweep'")
    assert sweep_run.data.params["start_design"] == "sampler"  # the start as run


def test_deferred_moves_fit_behind_the_trials_a_killed_sweep_left_waiting(workdir):
    """A resumed study still holds the trials a killed sweep enqueued (a retry, start moves): they run first, so
    the deferred moves get only the room left after them. Before, the sweep said "4 move(s) ... run first" and ran
    2, the others set aside at the confirmation."""
    from search.record import DEFERRED_ATTR

    args = ["multirun", "hydra.sweeper.params=null", "batch_size=choice(64,128)", "loader.num_workers=choice(0,1)",
            "precision=choice(fp32,bf16)", "train.budget_samples=800", "hydra.sweeper.baseline_repeats=1",
            "hydra.sweeper.seed=0"]
    first = run_search(*args, "hydra.sweeper.n_trials=2", cwd=workdir)
    assert first.returncode == 0, first.stderr[-3000:]
    load_study(workdir).enqueue_trial({"batch_size": 128, "loader.num_workers": 1, "precision": "fp32"})  # left waiting

    again = run_search(*args, "hydra.sweeper.n_trials=2", "hydra.sweeper.confirm_budget=0", cwd=workdir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert ("start: 1 move(s) an earlier sweep of this study had no room for run after the 1 trial(s) waiting "
            "before them (batch_size=128); 1 more wait for a later sweep") in " ".join(again.stdout.split()), \
        again.stdout[-3000:]
    study = load_study(workdir)
    assert [k for k, _ in study._storage.get_study_system_attrs(study._study_id)[DEFERRED_ATTR]] == ["precision"]
    ran = [t.user_attrs.get(START_ATTR) for t in study.get_trials(deepcopy=False) if START_ATTR in t.user_attrs]
    assert ran == ["loader.num_workers", "batch_size"]

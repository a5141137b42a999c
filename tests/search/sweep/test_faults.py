"""Failure is data: real faults injected into real sweeps (`python -m search multirun`
in a subprocess), each trial's outcome checked in the Optuna journal and in MLflow.

The faults come from tests/faulty_objective.py through the product's own
user-objective path (`objective.callable`, or `_target_` model and dataset),
selected by an extra `+fault.*` section and fired only on the trial whose
batch size matches, so the other trials of the same sweep must succeed.

The sweeps use the default sampler (TPE, whose first trials are random) with a
`hydra.sweeper.seed` chosen so that its draws are a permutation of the choices:
each batch size exactly once, asserted by every test; the assertions hold for
any order. The grid sampler has its own tests at the end.
"""
from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import psutil
import pytest
import yaml
from mlflow.tracking import MlflowClient
from optuna.trial import FrozenTrial, TrialState

from faulty_objective import RAISED_MESSAGE
from sweep_results import load_study, wait_gone

from conftest import REPO, TESTS, pythonpath, run_search
from search.record import named_constraints

pytestmark = pytest.mark.slow

# One study name for every faulty objective (by default a study is named after the objective's callable or model).
CALLABLE = ["objective=custom", "objective.callable=faulty_objective:objective", "hydra.sweeper.params=null",
            "hydra.sweeper.study_name=custom"]
THREE = [*CALLABLE, "batch_size=choice(32,64,128)", "hydra.sweeper.n_trials=3", "hydra.sweeper.seed=1"]
ONE_TRIAL = ["objective=custom", "hydra.sweeper.study_name=custom", "hydra.sweeper.params=null",
             "batch_size=choice(32,64)", "hydra.sweeper.n_trials=1", "train.budget_samples=512", "train.warmup_steps=1",
             "train.window_steps=2"]


# -- helpers ----------------------------------------------------------------------------------

def sweep(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """The real CLI with faulty_objective importable in the trial child; asserts that no
    process of the sweep (forkserver, trial, loader worker, DDP rank) outlives it."""
    token = uuid.uuid4().hex
    result = run_search("multirun", *args, cwd=workdir, timeout_s=240,
                        env={"PYTHONPATH": pythonpath(REPO, TESTS), "SEARCH_TEST_TOKEN": token})
    left = wait_gone(token)
    assert left == [], f"the sweep left processes behind: {[(p.pid, p.name()) for p in left]}"
    return result


def mlflow_runs(workdir: Path, role: str) -> list:
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    return client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string=f"tags.`search.role` = '{role}'", max_results=1000)


def trial_runs(workdir: Path) -> dict[int, object]:
    """MLflow trial runs by Optuna trial number."""
    return {int(r.data.tags["search.trial_number"]): r for r in mlflow_runs(workdir, "trial")}


def by_batch_size(trials: list[FrozenTrial]) -> dict[int, FrozenTrial]:
    assert sorted(t.params["batch_size"] for t in trials) == [32, 64, 128], [t.params for t in trials]
    return {t.params["batch_size"]: t for t in trials}


def assert_ok(trial: FrozenTrial, run) -> None:
    assert trial.state == TrialState.COMPLETE, trial.user_attrs
    assert trial.user_attrs["outcome"] == "ok" and named_constraints(trial) == {"runnable": 0.0}
    assert run.info.status == "FINISHED" and run.data.tags["search.outcome"] == "ok"
    assert trial.values == [run.data.metrics["throughput_samples_per_s"], run.data.metrics["val_accuracy"]]


def assert_failed(trial: FrozenTrial, run, outcome: str, says: str) -> None:
    """FAIL in Optuna, FAILED in MLflow, the outcome and its reason in both."""
    assert trial.state == TrialState.FAIL, trial.user_attrs
    assert trial.user_attrs["outcome"] == outcome, trial.user_attrs
    assert says in trial.user_attrs["reason"], trial.user_attrs["reason"]
    assert run.info.status == "FAILED"
    assert run.data.tags["search.outcome"] == outcome
    assert says in run.data.tags["search.reason"]


def three_trial_sweep_with_one_fault(workdir: Path, kind: str, on_batch_size: int, *extra: str):
    result = sweep(workdir, *THREE, f"+fault.kind={kind}", f"+fault.on_batch_size={on_batch_size}", *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    s = load_study(workdir, "custom")
    trials = by_batch_size(s.trials)
    runs = trial_runs(workdir)
    assert sorted(runs) == [0, 1, 2]
    for size, trial in trials.items():
        if size != on_batch_size:
            assert_ok(trial, runs[trial.number])
    faulted = trials[on_batch_size]
    return s, faulted, runs[faulted.number]


# -- crashes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, says", [("abort", "SIGABRT"), ("segfault", "SIGSEGV"),
                                        ("raise", f"RuntimeError: {RAISED_MESSAGE}")])
def test_a_crashing_trial_is_recorded_with_its_signal_or_exception_and_the_sweep_goes_on(
        workdir: Path, kind: str, says: str) -> None:
    s, faulted, run = three_trial_sweep_with_one_fault(workdir, kind, 64)
    assert_failed(faulted, run, "crashed", says)
    assert faulted not in s.best_trials
    if kind == "raise":
        assert "faulty_objective.py:" in faulted.user_attrs["reason"]  # where it was raised
    else:
        assert faulted.user_attrs["reason"].startswith(f"trial process killed by {says}")


# -- out of memory ----------------------------------------------------------------------------

def test_a_real_allocation_failure_under_the_memory_cap_is_oom_infeasible_and_the_next_trial_runs(
        workdir: Path) -> None:
    # the pytest process has torch, optuna and mlflow loaded: more address space than a trial
    # child needs, so every trial fits under the cap with ~1 GiB to spare for the leak
    cap = psutil.Process().memory_info().vms + 2**30
    s, oom, run = three_trial_sweep_with_one_fault(workdir, "leak", 32, f"trial.max_memory_bytes={cap}")

    assert oom.user_attrs["outcome"] == "oom" and "MemoryError" in oom.user_attrs["reason"], oom.user_attrs
    assert oom.state == TrialState.COMPLETE and named_constraints(oom) == {"runnable": 1.0}
    assert oom.values == [0.0, 0.0]  # placeholders, never compared as real figures
    assert oom.number not in {t.number for t in s.best_trials}
    peak = oom.user_attrs["metrics"]["peak_pss_tree_bytes"]
    assert peak > 512 * 2**20, peak  # the leak's held blocks were seen from outside
    assert run.info.status == "FAILED" and run.data.tags["search.outcome"] == "oom"
    assert run.data.metrics["peak_pss_tree_bytes"] == peak

    after = [t for t in s.trials if t.number > oom.number]
    assert after, "the oom trial must not be the last one for this test to say anything"
    assert after[0].user_attrs["outcome"] == "ok"  # a fresh process, not the one that ran out
    for t in s.trials:
        if t.user_attrs["outcome"] == "ok":
            assert t.user_attrs["metrics"]["vm_size_bytes"] < cap


# -- divergence -------------------------------------------------------------------------------

def test_non_finite_metrics_from_the_objective_are_diverged_failed_and_never_best(workdir: Path) -> None:
    s, nan, run = three_trial_sweep_with_one_fault(workdir, "nan", 128)
    assert_failed(nan, run, "diverged", "non-finite val_accuracy, val_loss")
    assert "val_accuracy" not in run.data.metrics  # only finite figures are logged
    assert nan.number not in {t.number for t in s.best_trials} and s.best_trials


def test_digits_with_an_absurd_learning_rate_really_diverges(workdir: Path) -> None:
    result = sweep(workdir, "hydra.sweeper.params=null", "optim.lr=choice(0.005,1e10)",
                   "hydra.sweeper.n_trials=2", "hydra.sweeper.seed=0", "train.budget_samples=640")
    assert result.returncode == 0, result.stderr[-3000:]
    s = load_study(workdir)
    runs = trial_runs(workdir)
    trials = {t.params["optim.lr"]: t for t in s.trials}
    assert sorted(trials) == [0.005, 1e10]
    assert_ok(trials[0.005], runs[trials[0.005].number])
    diverged = trials[1e10]
    assert_failed(diverged, runs[diverged.number], "diverged", "non-finite training loss")
    assert [t.number for t in s.best_trials] == [trials[0.005].number]


# -- hangs ------------------------------------------------------------------------------------

def test_a_hanging_objective_times_out_and_its_process_is_gone(workdir: Path) -> None:
    marker = workdir / "hung.pids"
    s, hung, run = three_trial_sweep_with_one_fault(workdir, "hang", 64, "trial.timeout_s=5",
                                                    f"+fault.marker='{marker}'")
    assert_failed(hung, run, "timeout", "trial.timeout_s=5")
    assert marker.exists()  # it really hung in the objective
    assert 5 <= hung.user_attrs["metrics"]["trial_wall_s"] < 20


def test_a_dataset_that_hangs_in_a_loader_worker_times_out_and_leaves_no_worker(workdir: Path) -> None:
    marker = workdir / "worker.pids"
    result = sweep(workdir, *ONE_TRIAL, "loader.num_workers=1", "trial.timeout_s=5",
                   "objective.model={_target_: torch.nn.Linear, in_features: 8, out_features: 2}",
                   f"objective.train_dataset={{_target_: faulty_objective.HangingDataset, marker: '{marker}'}}")
    assert result.returncode == 0, result.stderr[-3000:]
    [trial] = load_study(workdir, "custom").trials
    assert_failed(trial, trial_runs(workdir)[trial.number], "timeout", "trial.timeout_s=5")
    [worker_pid] = marker.read_text().split()
    assert not psutil.pid_exists(int(worker_pid))  # the worker, a grandchild of the sweep, was killed too


def test_a_ddp_rank_that_stalls_times_out_and_both_ranks_are_gone(workdir: Path) -> None:
    marker = workdir / "rank.pids"
    result = sweep(workdir, *ONE_TRIAL, "parallel.devices=2", "parallel.threads=1", "trial.timeout_s=5",
                   f"objective.model={{_target_: faulty_objective.StallingNet, stall_rank: 1, marker: '{marker}'}}",
                   "objective.train_dataset={_target_: faulty_objective.Blobs}")
    assert result.returncode == 0, result.stderr[-3000:]
    [trial] = load_study(workdir, "custom").trials
    assert_failed(trial, trial_runs(workdir)[trial.number], "timeout", "trial.timeout_s=5")
    [rank_pid] = marker.read_text().split()  # rank 1 reached its training forward, then stalled
    assert not psutil.pid_exists(int(rank_pid))


# -- giving up --------------------------------------------------------------------------------

def test_a_sweep_where_every_trial_crashes_gives_up_once_failure_min_trials_ran(workdir: Path) -> None:
    result = sweep(workdir, *CALLABLE, "batch_size=choice(32,64,128)", "+fault.kind=raise",
                   "hydra.sweeper.n_trials=8", "hydra.sweeper.failure_min_trials=4")
    assert result.returncode == 3, result.stderr[-3000:]
    gave_up = [line for line in result.stderr.splitlines() if line.startswith("search: gave up:")]
    assert len(gave_up) == 1, result.stderr[-3000:]
    assert "4 of 4 trials crashed or timed out (100%)" in gave_up[0]
    assert "hydra.sweeper.max_failure_rate=0.5" in gave_up[0]
    # docs/reliability.md: past the rate once failure_min_trials ran, it stops after the current trial
    trials = load_study(workdir, "custom").trials
    assert len(trials) == 4
    assert all(t.state == TrialState.FAIL and t.user_attrs["outcome"] == "crashed" for t in trials)
    runs = trial_runs(workdir)
    assert sorted(runs) == [0, 1, 2, 3] and all(r.info.status == "FAILED" for r in runs.values())
    assert [r for r in mlflow_runs(workdir, "sweep") if r.info.status == "RUNNING"] == []


def test_one_crash_in_six_trials_never_stops_the_sweep(workdir: Path) -> None:
    result = sweep(workdir, *CALLABLE, "batch_size=choice(8,16,32,64,128,256)",
                   "hydra.sweeper.n_trials=6", "hydra.sweeper.seed=96", "hydra.sweeper.failure_min_trials=4",
                   "+fault.kind=raise", "+fault.on_batch_size=8")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "gave up" not in result.stderr
    trials = load_study(workdir, "custom").trials
    assert sorted(t.params["batch_size"] for t in trials) == [8, 16, 32, 64, 128, 256]
    outcomes = {t.params["batch_size"]: t.user_attrs["outcome"] for t in trials}
    assert outcomes == {8: "crashed", 16: "ok", 32: "ok", 64: "ok", 128: "ok", 256: "ok"}


# -- product bugs found while writing these tests ----------------------------------------------

def test_the_sampler_override_selects_optunas_sampler(workdir: Path) -> None:
    result = run_search("run", "hydra/sweeper/sampler=grid", "--cfg", "hydra", cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    sweeper = yaml.safe_load(result.stdout)["hydra"]["sweeper"]
    assert (sweeper["sampler"] or {}).get("_target_") == "optuna.samplers.GridSampler"


def test_a_grid_sweep_runs_every_grid_point_once_and_exits_zero(workdir: Path) -> None:
    result = sweep(workdir, *THREE, "hydra/sweeper/sampler=grid")
    assert result.returncode == 0, result.stderr[-3000:]
    [parent] = mlflow_runs(workdir, "sweep")
    assert parent.data.params["sampler"].endswith("GridSampler")
    by_batch_size(load_study(workdir, "custom").trials)


def test_a_callable_that_reports_val_accuracy_gets_the_default_two_objective_sweep(workdir: Path) -> None:
    result = sweep(workdir, "objective=custom", "objective.callable=faulty_objective:objective",
                   "hydra.sweeper.params=null", "batch_size=choice(32,64)", "hydra.sweeper.n_trials=1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "measures no accuracy" not in result.stdout
    [trial] = load_study(workdir, "faulty_objective.objective").trials  # the study is named after the callable
    assert len(trial.values) == 2 and trial.values[1] == trial.user_attrs["metrics"]["val_accuracy"]

"""Bad input: one line with the rule, the value and the fix, exit status 2,
and no study, no MLflow run, no output directory."""
from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from cli_fork import ForkedCli, shared
from conftest import run_search
from sweep_results import assert_one_line_and_nothing_created, runs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cli() -> ForkedCli:
    """The CLI imported once, each run a fresh fork of it (tests/cli_fork.py)."""
    return shared()

CASES = [
    ("batch_size=choice(32,64", "grammar"),
    ("precision=choice()", "empty choice"),
    ("precision=fp64", "precision must be one of"),
    ("precision=choice(fp32,fp64)", "fp64"),
    ("batch_size=-1", "batch_size"),
    ("batch_size=abc", "batch_size"),
    ("batch_size=choice(32,32)", "distinct"),
    ("batch_size=range(64,32)", "start < stop"),
    ("batch_size=interval(16,48)", "batch_size takes whole numbers, and its sweep gives it real ones; got 16 to 48"),
    ("model_pruning.ratio=interval(0.5,0.1)", "low < high"),
    ("model_pruning.ratio=0.95", "model_pruning.ratio"),
    ("model_pruning.method=magic", "magic"),
    ("loader.num_workers=-2", "loader.num_workers"),
    ("parallel.devices=0", "parallel.devices"),
    ("optim.lr_scaling=cubic", "cubic"),
    ("train.budget_samples=0", "budget_samples"),
    ("nosuch.knob=choice(1,2)", "nosuch"),
    ("nosuch.knob=3", "nosuch"),
    ("objective=nosuch", "nosuch"),
    ("hydra/sweeper/sampler=nosuch", "nosuch"),
    ("hydra/sweeper/pruner=nosuch", "nosuch"),
    ("hydra/sweeper/sampler=cmaes", "cmaes optimises one metric; got 2 (throughput_samples_per_s, val_accuracy)"),
    ("hydra.sweeper.early_stopping_margin=1.5", "early_stopping_margin"),
    ("hydra.sweeper.storage=/nonexistent/dir/study.journal", "writable"),
    ("hydra.sweeper.storage=postgresql://alice:s3cret@127.0.0.1:1/db", "reachable"),
    ("hydra.sweep.dir=/proc/no/such/dir", "output directory must be writable"),
    ("hydra.sweeper.direction=upward", "fix: hydra.sweeper.direction=[maximize,maximize]"),
    ("hydra.sweeper.metrics=[throughput_samples_per_s]", "same length"),
    ("hydra.sweeper.n_trials=0", "n_trials"),
    ("hydra.sweeper.constraints=['val_accuracy > 0.9']", "metric >= number"),
    # numeric settings (search/sweep/settings.py): as typed, as composed, as swept
    ("trial.timeout_s=-5", "trial.timeout_s must be a number of seconds > 0; got -5"),
    ("hydra.sweeper.max_failure_rate=-1", "hydra.sweeper.max_failure_rate must be a number in [0, 1]; got -1"),
    ("hydra.sweeper.nightly={repeats:1}", "hydra.sweeper.nightly.repeats must be an int >= 2"),
    ("trial.timeout_s=choice(60,-5)", "trial.timeout_s must be a number of seconds > 0; got -5"),
    ("hydra.sweeper.n_trials=1,2", "a hydra setting takes one value"),
    # metric names (search/sweep/metric_names.py)
    ("hydra.sweeper.constraints=['no_such_metric >= 1']", "got 'no_such_metric', which it never reports"),
]


@pytest.mark.parametrize("override, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input(cli: ForkedCli, workdir: Path, override: str, words: str) -> None:
    assert_one_line_and_nothing_created(workdir, cli.run("multirun", override, cwd=workdir), words)


@pytest.mark.parametrize("overrides, words", [
    (["hydra.sweeper.metrics=[no_such_metric]", "hydra.sweeper.direction=maximize"],
     "hydra.sweeper.metrics must name metrics that objective 'digits' reports; got 'no_such_metric'"),
    (["objective=resnet", "hydra.sweeper.constraints=['val_accuracy >= 0.9']"],
     "hydra.sweeper.constraints must name metrics that objective 'resnet' reports; got 'val_accuracy'"),
    (["objective=resnet", "hydra.sweeper.metrics=[val_accuracy]", "hydra.sweeper.direction=maximize"],
     "hydra.sweeper.metrics must name a metric objective 'resnet' reports, and it measures no accuracy"),
], ids=["metric", "accuracy-on-resnet", "only-accuracy-on-resnet"])
def test_a_metric_the_workload_never_reports_is_refused(cli: ForkedCli, workdir: Path, overrides: list[str],
                                                       words: str) -> None:
    result = cli.run("multirun", *overrides, cwd=workdir)
    assert_one_line_and_nothing_created(workdir, result, words)


@pytest.mark.parametrize("overrides, words", [
    (["objective=custom", "objective.callable=os.path:no_such_function"],
     "objective.callable must name an attribute of module 'os.path'; got 'os.path:no_such_function'"),
    (["objective=custom", "objective.model={_target_: no_such_pkg.models.Net}",
      "objective.train_dataset={_target_: os.path.join}"],
     "objective.model._target_ must name an importable module; got 'no_such_pkg.models.Net'"),
], ids=["callable", "model-target"])
def test_a_misspelt_function_or_target_is_refused_before_any_trial(cli: ForkedCli, workdir: Path,
                                                                    overrides: list[str], words: str) -> None:
    """Seen in a user's first sweep: every trial ended infeasible with the same line, and the sweep exited 0."""
    for command in ("multirun", "run"):
        assert_one_line_and_nothing_created(workdir, cli.run(command, *overrides, cwd=workdir), words)


def test_objectives_is_still_read_as_metrics_with_one_line_saying_so(workdir: Path) -> None:
    """The setting's old name (before `objective` meant only the workload) keeps old configs working."""
    result = run_search("multirun", "hydra.sweeper.objectives=[no_such_metric]", "hydra.sweeper.direction=maximize",
                        cwd=workdir, timeout_s=120)
    assert_one_line_and_nothing_created(workdir, result, "hydra.sweeper.metrics must name metrics that objective "
                                                         "'digits' reports; got 'no_such_metric'")
    warned = [line for line in result.stdout.splitlines() if "deprecated" in line]
    assert len(warned) == 1 and "hydra.sweeper.objectives" in warned[0] and "hydra.sweeper.metrics" in warned[0]


def test_unreachable_mlflow_fails_fast(workdir: Path) -> None:
    result = run_search("multirun", cwd=workdir, timeout_s=120, env={"MLFLOW_TRACKING_URI": "http://127.0.0.1:1"})
    assert_one_line_and_nothing_created(workdir, result, "MLflow tracking URI must be reachable")


def test_a_study_with_other_directions_is_refused_untouched(workdir: Path) -> None:
    storage = JournalStorage(JournalFileBackend(str(workdir / "optuna.journal")))
    optuna.create_study(study_name="digits", storage=storage, direction="minimize")
    result = run_search("multirun", cwd=workdir, timeout_s=120)
    assert result.returncode == 2 and "already exists with directions ['minimize']" in result.stderr
    assert len(storage.get_all_studies()) == 1 and not (workdir / "multirun").exists()
    assert runs(workdir, "sweep") == []


def test_run_with_a_sweep_says_it_trains_one_configuration(cli: ForkedCli, workdir: Path) -> None:
    """Hydra's own answer was `Sweep parameters ... requires --multirun`, a traceback hint and exit status 1."""
    result = cli.run("run", "batch_size=choice(16,32)", cwd=workdir)
    assert_one_line_and_nothing_created(workdir, result, "python -m search run trains one configuration, one value "
                                                         "per knob; got batch_size=choice(16,32); fix: python -m "
                                                         "search multirun batch_size=choice(16,32)")


def test_report_and_export_away_from_the_sweep_create_nothing_and_name_their_own_option(cli: ForkedCli,
                                                                                          workdir: Path) -> None:
    """Seen in an empty directory: `export --study-name digits` left a 0-byte optuna.journal and said the
    storage held no studies, fix --study-name; an unreachable database's fix named hydra.sweeper.storage."""
    for command in ("export", "report"):
        result = cli.run(command, "--study-name", "digits", cwd=workdir)
        assert_one_line_and_nothing_created(workdir, result, "--storage must name an existing study storage; got "
                                                             "optuna.journal, which does not exist here")
        assert not (workdir / "optuna.journal").exists()
    result = cli.run("export", "--storage", "postgresql://alice:s3cret@127.0.0.1:1/db", cwd=workdir)
    assert_one_line_and_nothing_created(workdir, result, "correct --storage")


def test_a_report_away_from_the_sweeps_mlflow_store_creates_none(monkeypatch, tmp_path: Path) -> None:
    from search.tracking.mlflow_client import log_report

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    problem = log_report("a-run-of-the-sweep", [])
    assert problem is not None and "no MLflow store at" in problem and "MLFLOW_TRACKING_URI" in problem
    assert list(tmp_path.iterdir()) == []

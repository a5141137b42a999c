"""`python -m search nightly`, `report` and `export` end to end, against a
real `mlflow server` on loopback: three nights in a row on the CPU in one
storage (the third made slower on purpose), then the report and the export
of a night, the exported overrides run again, and the nights' trials as a
person sees them in the MLflow UI (headless Chromium, Debian's `chromium`).

The trials use tests/paced_objective.py (real torch steps padded to a known
step time) through the product's user-objective path, so the verdicts do not
depend on how busy the machine's other tenants are. The UI screenshot is
kept in pytest's tmp dir, and in $SEARCH_TEST_ARTIFACTS when that is set.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
import yaml
from conftest import REPO, TESTS, pythonpath, run_search
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from servers import MlflowServer

from search.errors import EXIT_REGRESSION
from search.nightly.night import SUPERSEDED, SUPERSEDED_BY, VERDICT
from search.record import NIGHTLY_ROLE_ATTR
from search.tracking.mlflow_client import compare_url, experiment_url
from search.tracking.mlflow_runs import EXPERIMENT_KIND, MODEL_TRAINING, flatten

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NIGHT = ["objective=custom", "objective.callable=paced_objective:objective", "hydra.sweeper.params=null",
         "batch_size=choice(32,64)", "hydra.sweeper.n_trials=2", "hydra.sweeper.seed=0",
         "hydra.sweeper.nightly.repeats=3", "hydra.sweeper.nightly.warm_start=1",
         # Throughput on a shared two-core machine drifts by tens of percent between runs; the slow night
         # below is ~7x slower per step, so a 30% floor separates the two with room to spare.
         "hydra.sweeper.nightly.min_drop=0.3"]
SLOW = "+pace.step_ms=150"  # the paced objective's steps take 20 ms by default


@dataclass
class Nights:
    dir: Path
    server: MlflowServer
    env: dict
    runs: dict  # night name -> CompletedProcess
    reports: dict  # night name -> nightly.md text

    @property
    def client(self) -> MlflowClient:
        return MlflowClient(self.server.uri)

    def study(self, name: str) -> optuna.Study:
        return optuna.load_study(study_name=name,
                                 storage=JournalStorage(JournalFileBackend(str(self.dir / "optuna.journal"))))

    def parent_run(self, study_name: str):
        """The night's parent run that carries its verdict (night-2 is run again: its first one is superseded)."""
        [run] = [r for r in self.client.search_runs(
            [e.experiment_id for e in self.client.search_experiments()], max_results=10,
            filter_string=f"tags.`search.role` = 'sweep' and tags.`search.study_name` = '{study_name}'")
            if r.data.tags.get(VERDICT) != SUPERSEDED]
        return run


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nights]:
    """Night 1, night 2 the same, night 3 slower, then night 2 run again (as after it was killed), then night 4
    still slower: run once, looked at by the tests below (`night-2-again` is the re-run's report)."""
    root = tmp_path_factory.mktemp("nightly")
    server = MlflowServer(f"sqlite:///{root}/server.db").start()
    env = {"MLFLOW_TRACKING_URI": server.uri, "PYTHONPATH": pythonpath(REPO, TESTS)}
    found = Nights(root, server, env, {}, {})
    try:
        for name, study, extra in (("night-1", "night-1", []), ("night-2", "night-2", []),
                                   ("night-3", "night-3", [SLOW]), ("night-2-again", "night-2", []),
                                   ("night-4", "night-4", [SLOW])):
            done = run_search("nightly", f"hydra.sweeper.study_name={study}", f"hydra.sweep.dir={name}", *NIGHT,
                              *extra, cwd=root, env=env, timeout_s=300)
            report = root / name / "report" / "nightly.md"
            assert report.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
            found.runs[name], found.reports[name] = done, report.read_text()
        yield found
    finally:
        server.stop()


def test_nights_warm_start_compare_and_catch_a_regression_without_a_false_alarm(nights: Nights) -> None:
    first, text = nights.runs["night-1"], nights.reports["night-1"]
    assert first.returncode == 0, first.stderr[-3000:]
    assert "# Nightly night-1: OK" in text and "First night of this series." in text
    trials_1 = nights.study("night-1").trials
    best_1 = max((t for t in trials_1 if t.state.name == "COMPLETE"), key=lambda t: t.values[0])
    assert best_1.params == {"batch_size": 64}  # 64 samples per 20 ms step beat 32
    topped = [t for t in trials_1 if t.user_attrs.get(NIGHTLY_ROLE_ATTR) == "top_up"]
    assert len(topped) >= 1 and all(t.params == best_1.params for t in topped)  # tomorrow compares with repeats

    second, text = nights.runs["night-2"], nights.reports["night-2"]
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    trials = nights.study("night-2").trials
    incumbent = [t for t in trials if t.user_attrs.get(NIGHTLY_ROLE_ATTR) == "incumbent"]
    warm = [t for t in trials if t.user_attrs.get(NIGHTLY_ROLE_ATTR) == "warm_start"]
    assert [t.number for t in incumbent] == [0, 1, 2] and all(t.params == best_1.params for t in incumbent)
    assert [t.params for t in warm] == [{"batch_size": 32}]  # night 1's other configuration, enqueued next
    assert "# Nightly night-2: OK" in text and "No regression" in text, text
    assert "versus last night's best (night-1)" in text and "repeats tonight vs 3 before" in text
    assert "None (same as night-1)." in text  # no software or hardware change between the nights
    parent = nights.parent_run("night-2")
    assert parent.data.tags["search.nightly"] == "true" and parent.data.tags[VERDICT] == "ok"
    # the night's own numbers, to chart nights side by side without opening their trials
    assert parent.data.metrics["nightly_result_throughput_samples_per_s"] > 0
    assert 0 <= parent.data.metrics["nightly_incumbent_p_value"] <= 1
    assert "nightly_incumbent_change_fraction" in parent.data.metrics
    assert {a.path for a in nights.client.list_artifacts(parent.info.run_id, "report")} >= {
        "report/nightly.md", "report/nightly.html", "report/pareto_front.png", "report/plots.html"}
    assert nights.client.get_run(incumbent[0].user_attrs["mlflow_run_id"]).data.tags[NIGHTLY_ROLE_ATTR] == "incumbent"

    third, text = nights.runs["night-3"], nights.reports["night-3"]
    assert third.returncode == EXIT_REGRESSION, third.stdout[-3000:] + third.stderr[-3000:]
    assert "# Nightly night-3: REGRESSION" in text and "**REGRESSION**: last night's best (night-2" in text
    assert nights.parent_run("night-3").data.tags[VERDICT] == "regression"
    assert (nights.dir / "night-3" / "report" / "nightly.html").read_text().count("<h2>") == 4


def test_a_regression_that_stands_is_a_regression_again_the_next_night(nights: Nights) -> None:
    """Night 4 is as slow as night 3: its incumbent (night 3's slow answer) measures the same, and its test against
    night 2, the last night that configuration was fast on, still fails. Was: exit 0, "No regression"."""
    done, text = nights.runs["night-4"], nights.reports["night-4"]
    assert done.returncode == EXIT_REGRESSION, done.stdout[-3000:] + done.stderr[-3000:]
    assert "a regression stands since night-3" in done.stdout
    assert "# Nightly night-4: REGRESSION" in text and "**STILL A REGRESSION** since night-3: " in text, text
    assert "is still slower than on night-2, the last night it was fast on" in text
    assert "No regression: last night's best (night-3" in text  # slow against slow
    tags = nights.parent_run("night-4").data.tags
    assert tags[VERDICT] == "regression" and tags["search.nightly.regressed_since"] == "night-3"
    assert nights.parent_run("night-4").data.metrics["nightly_standing_change_fraction"] < -0.3


def test_a_night_run_again_after_a_later_one_compares_with_the_night_before_it(nights: Nights) -> None:
    """Night 2 run again once night 3 (slower) exists: it compares with night 1, as it did the first time. Was:
    with night 3, its incumbent and "before" figures from a later night. Its first report's parent run is
    superseded by the re-run's."""
    again, text = nights.runs["night-2-again"], nights.reports["night-2-again"]
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "nightly: 1 earlier nights in series" in again.stdout and "incumbent from night-1" in again.stdout
    assert "versus last night's best (night-1)" in text and "last night's best (night-1:" in text, text
    assert "night-3" not in text and "None (same as night-1)." in text, text
    assert "none of tonight's runs of it ran in this run: the night was run again" in text, text  # not new figures
    assert "ran in this run" not in nights.reports["night-3"]
    runs = nights.client.search_runs([e.experiment_id for e in nights.client.search_experiments()],
                                     "tags.`search.role` = 'sweep' and tags.`search.study_name` = 'night-2'")
    by_verdict = {r.data.tags[VERDICT]: r for r in runs}
    assert sorted(by_verdict) == ["ok", SUPERSEDED], [r.data.tags for r in runs]
    assert by_verdict[SUPERSEDED].data.tags[SUPERSEDED_BY] == by_verdict["ok"].info.run_id


def test_report_and_export_write_their_files_and_the_export_runs_as_measured(nights: Nights) -> None:
    shown = run_search("report", "--study-name", "night-1", "--out", "rep", cwd=nights.dir, env=nights.env)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "Pareto front of study 'night-1'" in shown.stdout
    for name in ("pareto_front.png", "importances_throughput_samples_per_s.png", "history_val_accuracy.png",
                 "knob_effect_throughput_samples_per_s.png", "plots.html"):
        assert (nights.dir / "rep" / name).stat().st_size > 1000, name
    assert "plotly" in (nights.dir / "rep" / "plots.html").read_text()[:2_000_000]

    # the fastest configuration of night 2 with an accuracy floor, and it runs as it was measured
    exported = run_search("export", "--study-name", "night-2", "--where", "val_accuracy >= 0.5", "--out",
                          "best.yaml", cwd=nights.dir, env=nights.env)
    assert exported.returncode == 0, exported.stderr[-3000:]
    best = yaml.safe_load((nights.dir / "best.yaml").read_text())
    assert "batch_size=64" in best["overrides"] and not any(o.startswith("hydra.") for o in best["overrides"])
    assert best["fingerprint"]["torch_version"] and best["metrics"]["val_accuracy"] >= 0.5
    assert len(best["trials"]) >= 3  # the incumbent's repeats: medians, not one lucky trial
    rerun = run_search("run", *best["overrides"], "hydra.run.dir=rerun", cwd=nights.dir, env=nights.env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    composed = flatten(OmegaConf.to_container(OmegaConf.load(nights.dir / "rerun" / ".hydra" / "config.yaml"),
                                              resolve=True))
    trial = nights.study("night-2").trials[best["trials"][-1]]
    measured = nights.client.get_run(trial.user_attrs["mlflow_run_id"]).data.params
    assert {k: str(v) for k, v in composed.items()} == measured


def render(url: str, screenshot: Path, profile: Path) -> str:
    """The page's text after its scripts ran (the UI is a React app), and a screenshot."""
    args = [CHROMIUM, "--headless", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
            "--window-size=1600,1400", "--virtual-time-budget=15000", f"--screenshot={screenshot}", "--dump-dom", url]
    if os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    dom = subprocess.run(args, capture_output=True, text=True, timeout=300).stdout
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.DOTALL)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium; .ci/run does)")
def test_the_trials_of_a_night_compare_side_by_side_in_the_mlflow_ui(nights: Nights, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    client = nights.client
    experiment = client.get_experiment_by_name("nightly-paced_objective.objective")  # its callable names it
    trials = client.search_runs([experiment.experiment_id], max_results=10, filter_string=(
        "tags.`search.role` = 'trial' and tags.`search.study_name` = 'night-1'"))
    assert len(trials) >= 3
    monkeypatch.setenv("MLFLOW_TRACKING_URI", nights.server.uri)
    url = compare_url([r.info.run_id for r in trials])  # the link a sweep prints at its end
    assert url is not None and url.startswith(f"{nights.server.uri}/#/compare-runs?runs=")
    shot = tmp_path / "mlflow-ui-compare-trials.png"
    (tmp_path / "chromium-profile").mkdir()
    text = render(url, shot, tmp_path / "chromium-profile")
    keep(shot)
    assert f"Comparing {len(trials)} Runs from 1 Experiment" in text, text[:2000]
    for run in trials:
        assert run.info.run_name in text and run.info.run_id in text
    params, metrics = text.split(" Parameters ", 1)[1].split(" Metrics ", 1)
    for name in ("batch_size", "loader.num_workers", "train.budget_samples", "objective.callable"):
        assert f" {name} " in params, name  # the same param names for every trial: one row each
    assert re.search(r" batch_size( (32|64))+ ", params)  # the knob's values side by side
    for name in ("throughput_samples_per_s", "val_accuracy", "val_loss", "trial_wall_s"):
        assert f" {name} " in metrics, name
    for run in trials:
        assert f"{run.data.metrics['val_accuracy']:.3g}"[:4] in metrics  # each trial's value is on the page


def keep(shot: Path) -> None:
    assert shot.stat().st_size > 10_000
    if os.environ.get("SEARCH_TEST_ARTIFACTS"):
        Path(os.environ["SEARCH_TEST_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(os.environ["SEARCH_TEST_ARTIFACTS"]) / shot.name)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium; .ci/run does)")
def test_the_experiment_opens_on_its_training_runs_not_the_genai_view(nights: Nights, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow 3.17 opens an experiment in its GenAI view (traces, "Evaluation runs") unless the address asks
    for model training; the experiment is tagged as model training too, for the MLflow versions that read it."""
    experiment = nights.client.get_experiment_by_name("nightly-paced_objective.objective")
    assert experiment.tags[EXPERIMENT_KIND] == MODEL_TRAINING
    monkeypatch.setenv("MLFLOW_TRACKING_URI", nights.server.uri)
    url = experiment_url(experiment.experiment_id)  # the address a sweep prints at its end
    shot = tmp_path / "mlflow-ui-experiment.png"
    (tmp_path / "chromium-profile").mkdir()
    text = render(url, shot, tmp_path / "chromium-profile")
    keep(shot)
    assert "Evaluation runs" not in text and "Observability" not in text, text[:2000]
    assert " Runs " in text and " matching runs" in text, text[:2000]
    sweeps = nights.client.search_runs([experiment.experiment_id], "tags.`search.role` = 'sweep'")
    assert sweeps and all(run.info.run_name in text for run in sweeps)  # the sweeps' runs, their trials under them

"""The trials of a sweep, as a person sees them in the MLflow UI: a real
`mlflow server` on loopback, a small sweep against it, and headless Chromium
(Debian's `chromium` package) rendering the page that compares the sweep's
trial runs. The screenshot is kept: in pytest's tmp dir, and in
$SEARCH_TEST_ARTIFACTS when that is set (CI keeps it there)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import REPO, run_search
from servers import MlflowServer

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def render(url: str, screenshot: Path, profile: Path) -> str:
    """The page's text after its scripts ran (the UI is a React app), and a screenshot."""
    args = [CHROMIUM, "--headless", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
            "--window-size=1600,1400", "--virtual-time-budget=15000", f"--screenshot={screenshot}", "--dump-dom", url]
    if os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    dom = subprocess.run(args, capture_output=True, text=True, timeout=300).stdout
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium; .ci/run does)")
def test_the_trials_of_a_sweep_compare_side_by_side_in_the_mlflow_ui(workdir: Path, tmp_path: Path) -> None:
    server = MlflowServer(f"sqlite:///{tmp_path}/server.db").start()
    try:
        done = run_search("multirun", "objective=custom", "objective.callable=paced_objective:objective",
                          "hydra.sweeper.params=null", "batch_size=choice(32,64)", "hydra.sweeper.n_trials=2",
                          "hydra.sweep.dir=sweep", cwd=workdir, timeout_s=300,
                          env={"MLFLOW_TRACKING_URI": server.uri, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])})
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        client = MlflowClient(server.uri)
        experiment = client.get_experiment_by_name("custom")
        trials = client.search_runs([experiment.experiment_id], "tags.`search.role` = 'trial'")
        [parent] = client.search_runs([experiment.experiment_id], "tags.`search.role` = 'sweep'")
        assert len(trials) == 2
        assert {a.path for a in client.list_artifacts(parent.info.run_id, "report")} >= {
            "report/pareto_front.png", "report/plots.html"}  # the report, through the server's artifact proxy
        assert (workdir / "sweep" / "report" / "pareto_front.png").is_file()

        runs = urllib.parse.quote(json.dumps([r.info.run_id for r in trials]))
        ids = urllib.parse.quote(json.dumps([experiment.experiment_id]))
        shot = tmp_path / "mlflow-ui-compare-trials.png"
        profile = tmp_path / "chromium-profile"
        profile.mkdir()
        text = render(f"{server.uri}/#/compare-runs?runs={runs}&experiments={ids}", shot, profile)
    finally:
        server.stop()
    if os.environ.get("SEARCH_TEST_ARTIFACTS"):
        Path(os.environ["SEARCH_TEST_ARTIFACTS"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(os.environ["SEARCH_TEST_ARTIFACTS"]) / shot.name)
    assert shot.stat().st_size > 10_000
    assert "Comparing 2 Runs from 1 Experiment" in text, text[:2000]
    for run in trials:
        assert run.info.run_name in text and run.info.run_id in text
    params, metrics = text.split(" Parameters ", 1)[1].split(" Metrics ", 1)
    for name in ("batch_size", "loader.num_workers", "train.budget_samples", "objective.callable"):
        assert f" {name} " in params, name  # the same param names for every trial: one row each
    assert " 32 64 " in params or " 64 32 " in params  # the knob's values side by side
    for name in ("throughput_samples_per_s", "val_accuracy", "val_loss", "trial_wall_s"):
        assert f" {name} " in metrics, name
    for run in trials:
        assert f"{run.data.metrics['val_accuracy']:.3g}"[:4] in metrics  # each trial's value is on the page

"""The MLflow links a sweep prints, and the experiment's kind, on a real
MLflow SQLite store (the pages themselves are rendered by headless Chromium in
tests/search/nightly/test_nightly.py)."""
from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from search.tracking.mlflow_client import LOCAL_UI, compare_url, experiment_url, ui_base
from search.tracking.mlflow_runs import EXPERIMENT_KIND, MODEL_TRAINING, start_sweep


def test_the_sweeps_experiment_is_model_training_and_a_kind_set_by_hand_is_kept(workdir: Path) -> None:
    client = MlflowClient()
    start_sweep("digits", "digits", params={}, tags={})
    assert client.get_experiment_by_name("digits").tags[EXPERIMENT_KIND] == MODEL_TRAINING
    old = client.create_experiment("older")  # made before the tag existed
    start_sweep("older", "older", params={}, tags={})
    assert client.get_experiment(old).tags[EXPERIMENT_KIND] == MODEL_TRAINING
    mine = client.create_experiment("mine", tags={EXPERIMENT_KIND: "finetuning"})
    start_sweep("mine", "mine", params={}, tags={})
    assert client.get_experiment(mine).tags[EXPERIMENT_KIND] == "finetuning"


def test_compare_url_names_the_runs_and_their_experiment(workdir: Path) -> None:
    sweep = start_sweep("digits", "digits", params={}, tags={})
    runs = [sweep.client.create_run(sweep.experiment_id).info.run_id for _ in range(2)]
    url = compare_url([runs[0], runs[1], runs[0], ""])
    assert url is not None and url.startswith(f"{LOCAL_UI}/#/compare-runs?")
    query = urllib.parse.parse_qs(url.split("?", 1)[1])
    assert json.loads(query["runs"][0]) == runs and json.loads(query["experiments"][0]) == [sweep.experiment_id]
    assert compare_url(runs[:1]) is None  # nothing to compare
    assert compare_url([runs[0], "0" * 32]) is None  # a run MLflow does not have: no link
    assert experiment_url(sweep.experiment_id) == (
        f"{LOCAL_UI}/#/experiments/{sweep.experiment_id}?workflowType=machine_learning")


def test_a_servers_address_keeps_no_user_info(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://alice:s3cret-pw@mlflow.example.org:8443/team/")
    assert ui_base() == "https://mlflow.example.org:8443/team"

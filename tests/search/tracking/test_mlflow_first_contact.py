"""The first contact with a tracking database that does not exist yet: MLflow makes its tables, and its
INFO lines about that do not open the user's first sweep."""
from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from search.tracking.mlflow_client import check_reachable


def test_a_new_database_is_made_without_mlflows_info_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capfd: pytest.CaptureFixture[str]) -> None:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    check_reachable()
    out, err = capfd.readouterr()
    assert "database tables" not in out + err, out + err
    assert (tmp_path / "mlflow.db").exists()
    assert MlflowClient(uri).search_experiments()  # the tables were made: the Default experiment is there

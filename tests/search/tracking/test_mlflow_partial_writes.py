"""MLflow stops between two writes of one trial's run (the run made, its params not; or the create
reached the server and its answer did not): the next flush goes on from the first write missing, so
the run ends with everything once and is never made twice. A real MlflowClient on a real store; the
outage is one refused call, injected at the client, because a real server cannot be stopped between
two calls of one flush on purpose (tests/search/tracking/test_mlflow_outage.py stops a real one)."""
from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from search.tracking import mlflow_runs as tracking


class Outage(ConnectionError):
    pass


class FlakyClient(MlflowClient):
    """A real client whose named calls fail once each, after (`lost_answer`) or before doing their work."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.fail_next: dict[str, bool] = {}  # method -> fail after the work was done (the answer is lost)

    def _maybe_fail(self, name: str, call):
        lost_answer = self.fail_next.pop(name, None)
        if lost_answer is False:
            raise Outage(f"{name}: connection refused")
        result = call()
        if lost_answer:
            raise Outage(f"{name}: read timed out")
        return result

    def create_run(self, *args, **kwargs):
        return self._maybe_fail("create_run", lambda: super(FlakyClient, self).create_run(*args, **kwargs))

    def log_batch(self, *args, **kwargs):
        return self._maybe_fail("log_batch", lambda: super(FlakyClient, self).log_batch(*args, **kwargs))


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tracking.Sweep:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    sweep = tracking.start_sweep("digits", "digits", {"n_trials": 2}, {})
    sweep.client = FlakyClient(uri)
    return sweep


def retry_now(sweep: tracking.Sweep) -> None:
    sweep.down_since = None  # the back-off has passed


def trial_runs(sweep: tracking.Sweep):
    return sweep.client.search_runs([sweep.experiment_id], "tags.`search.role` = 'trial'", max_results=10)


def test_params_refused_after_the_run_was_made_are_written_at_the_next_flush(sweep: tracking.Sweep) -> None:
    sweep.client.fail_next["log_batch"] = False  # the run is made, then MLflow refuses its params
    run_id = tracking.start_trial(sweep, 0, {"batch_size": 64, "loader.num_workers": 0})
    assert run_id is not None and sweep.down_since is not None
    retry_now(sweep)
    tracking.end_trial(sweep, 0, "ok", {"throughput_samples_per_s": 123.0}, {"search.reason": ""},
                       {"gpu_util_percent": [(0, 50.0, 1_000), (1, 60.0, 2_000)]})
    [run] = trial_runs(sweep)
    assert run.info.status == "FINISHED" and not sweep.pending
    assert run.data.params == {"batch_size": "64", "loader.num_workers": "0"}
    assert run.data.metrics["throughput_samples_per_s"] == 123.0


def test_a_create_whose_answer_was_lost_is_found_not_made_again(sweep: tracking.Sweep) -> None:
    sweep.client.fail_next["create_run"] = True  # made on the server, the answer lost
    assert tracking.start_trial(sweep, 0, {"batch_size": 64}) is None
    retry_now(sweep)
    tracking.end_trial(sweep, 0, "ok", {"throughput_samples_per_s": 1.0}, {})
    [run] = trial_runs(sweep)
    assert run.info.status == "FINISHED" and run.data.params == {"batch_size": "64"}


def test_series_written_before_the_outage_are_not_written_twice(sweep: tracking.Sweep) -> None:
    tracking.start_trial(sweep, 0, {"batch_size": 64})
    series = {"gpu_util_percent": [(0, 50.0, 1_000), (1, 60.0, 2_000)]}
    sweep.client.fail_next["log_batch"] = True  # the series land, the answer is lost
    tracking.end_trial(sweep, 0, "ok", {"throughput_samples_per_s": 1.0}, {}, series)
    assert sweep.pending  # not closed yet
    retry_now(sweep)
    tracking.flush(sweep)
    [run] = trial_runs(sweep)
    assert run.info.status == "FINISHED" and not sweep.pending
    history = sweep.client.get_metric_history(run.info.run_id, "gpu_util_percent")
    assert [(m.step, m.value) for m in history] == [(0, 50.0), (1, 60.0)]


def test_an_older_unlogged_file_without_the_write_flags_still_loads(sweep: tracking.Sweep, tmp_path: Path) -> None:
    import json

    path = tmp_path / tracking.UNLOGGED_FILE
    tracking.save_unlogged(sweep, path)
    state = json.loads(path.read_text())
    state["records"] = [{"number": 0, "params": {"batch_size": 64}, "run_id": None, "ended": True, "outcome": "ok",
                         "metrics": {"throughput_samples_per_s": 2.0}, "tags": {}, "series": {}}]
    path.write_text(json.dumps(state))
    loaded = tracking.load_unlogged(MlflowClient(), path)
    tracking.flush(loaded)
    [run] = trial_runs(loaded)
    assert run.info.status == "FINISHED" and run.data.params == {"batch_size": "64"}


def test_a_sweep_run_whose_params_are_refused_is_not_left_behind(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's parent run is made, then MLflow refuses its params: the start fails, and no RUNNING parent
    run without params stays in the experiment (a re-run makes a whole one)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)

    class RefusesParams(FlakyClient):
        def __init__(self, *args) -> None:
            super().__init__(uri)
            self.fail_next["log_batch"] = False

    monkeypatch.setattr(tracking, "MlflowClient", RefusesParams)
    with pytest.raises(Outage):
        tracking.start_sweep("digits", "digits", {"n_trials": 2}, {})
    monkeypatch.undo()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)
    [experiment] = [e for e in client.search_experiments() if e.name == "digits"]
    assert client.search_runs([experiment.experiment_id]) == []
    sweep = tracking.start_sweep("digits", "digits", {"n_trials": 2}, {})
    [run] = client.search_runs([experiment.experiment_id])
    assert run.info.run_id == sweep.parent_run_id and run.data.params == {"n_trials": "2"}

"""A night's bookkeeping on real (in-memory) Optuna studies: what a killed night leaves for the next one, what
a resumed night or a second worker enqueues, what still runs past max_wall_s, and a night whose incumbent
went untested. The end-to-end nights are in test_nightly.py."""
from __future__ import annotations

import time
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from search.errors import EXIT_NIGHTLY_FAILED
from search.nightly import night as nightly
from search.record import ANSWER_ATTR, NIGHTLY_ROLE_ATTR, ROLE_ATTR
from search.sweep.trial_loop import out_of_time

SPACE = {"batch_size": CategoricalDistribution([64, 256])}
CFG = {"series": "s", "metric": "throughput_samples_per_s", "repeats": 3, "warm_start": 1, "alpha": 0.01,
       "min_drop": 0.05}


def add(study: optuna.Study, batch_size: int, throughput: float, accuracy: float,
        extra_metrics: dict[str, float] | None = None, **attrs) -> None:
    metrics = {"throughput_samples_per_s": throughput, "val_accuracy": accuracy, **(extra_metrics or {})}
    study.add_trial(create_trial(params={"batch_size": batch_size}, distributions=SPACE, values=[throughput],
                                 user_attrs={"outcome": "ok", "metrics": metrics, **attrs}))


def night(storage: optuna.storages.BaseStorage, name: str, started: str) -> optuna.Study:
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    study.set_user_attr(nightly.SERIES, "s")
    study.set_user_attr(nightly.STARTED, started)
    return study


def answered(storage: optuna.storages.BaseStorage, name: str, other_throughput: float,
             other_accuracy: float) -> optuna.Study:
    """A night that ran to its answer, your configuration (batch_size=64), beside batch_size=256."""
    done = night(storage, name, "2026-11-25T02:00:00+0000")
    add(done, 64, 1400.0, 0.83, **{ROLE_ATTR: "baseline"})
    add(done, 256, other_throughput, other_accuracy)
    done.set_user_attr(ANSWER_ATTR, {"params": {"batch_size": 64}})
    return done


def test_a_night_killed_before_its_answer_is_nobodys_incumbent() -> None:
    storage = optuna.storages.InMemoryStorage()
    done = answered(storage, "n1", 2000.0, 0.43)
    killed = night(storage, "n2", "2026-11-26T02:00:00+0000")
    add(killed, 64, 1400.0, 0.83, **{ROLE_ATTR: "baseline"})
    add(killed, 256, 2000.0, 0.43)  # the fastest, at half the accuracy: was the next night's incumbent
    assert nightly.night_result(done, CFG["metric"]).params == {"batch_size": 64}
    assert nightly.night_result(killed, CFG["metric"]) is None
    tonight = optuna.create_study(study_name="n3", storage=storage, direction="maximize")
    found = nightly.start(CFG, tonight, storage, SPACE)
    assert found.incumbent_night == "n1" and found.incumbent.params == {"batch_size": 64}


def test_a_resumed_night_or_a_second_worker_enqueues_nothing_twice() -> None:
    storage = optuna.storages.InMemoryStorage()
    answered(storage, "n1", 1300.0, 0.80)
    tonight = optuna.create_study(study_name="n2", storage=storage, direction="maximize")
    started = nightly.start(CFG, tonight, storage, SPACE)
    assert started.enqueued == started.on_top == 3 + 1  # the incumbent's repeats, one warm start
    assert nightly.start(CFG, tonight, storage, SPACE, first=False).on_top == 0  # another worker
    again = nightly.start(CFG, tonight, storage, SPACE)  # the night run again: was 4 more each time
    assert again.enqueued == 0 and again.on_top == 4  # what waits still runs on top of n_trials
    waiting = tonight.get_trials(states=(TrialState.WAITING,))
    assert [t.user_attrs[NIGHTLY_ROLE_ATTR] for t in waiting] == ["incumbent"] * 3 + ["warm_start"]
    trial = tonight.ask()  # one repeat ran ok (a killed one is FAIL, and enqueued again as a retry)
    tonight.tell(trial, 1400.0)
    assert nightly.start(CFG, tonight, storage, SPACE).enqueued == 0


def test_past_max_wall_s_only_your_configuration_and_the_incumbents_repeats_still_run() -> None:
    study = optuna.create_study()
    past, future = time.monotonic() - 1, time.monotonic() + 60
    assert not out_of_time(study, None) and not out_of_time(study, future) and out_of_time(study, past)
    study.enqueue_trial({"batch_size": 64}, user_attrs={NIGHTLY_ROLE_ATTR: "warm_start"})
    assert out_of_time(study, past)  # a search trial: not after the deadline
    study.enqueue_trial({"batch_size": 64}, user_attrs={NIGHTLY_ROLE_ATTR: "incumbent"})
    assert not out_of_time(study, past)  # was: skipped, and the night said "No regression" with exit 0


def test_an_incumbent_not_measured_again_is_not_a_fine_night(tmp_path: Path) -> None:
    storage = optuna.storages.InMemoryStorage()
    done = night(storage, "n1", "2026-11-25T02:00:00+0000")
    for throughput in (1400.0, 1410.0, 1390.0):
        add(done, 64, throughput, 0.83)
    tonight = optuna.create_study(study_name="n2", storage=storage, direction="maximize")
    state = nightly.start(CFG, tonight, storage, SPACE)
    for trial in tonight.get_trials(states=(TrialState.WAITING,)):  # its repeats all failed tonight
        tonight.tell(tonight.ask(), state=TrialState.FAIL)
    add(tonight, 256, 1500.0, 0.80)
    assert nightly.finish(state, [CFG["metric"]], tmp_path, None, []) == EXIT_NIGHTLY_FAILED
    report = (tmp_path / "nightly.md").read_text()
    assert "# Nightly n2: UNTESTED" in report and "**NOT TESTED**" in report and "No regression" not in report
    assert tonight.user_attrs[nightly.VERDICT] == "untested"


def test_what_a_killed_earlier_night_left_running_is_closed_not_retried(capsys) -> None:
    import socket
    from types import SimpleNamespace

    from search.nightly.sweep_hooks import NightlyHooks
    from search.record import WORKER_ATTR
    from search.sweep.trial_loop import recover

    storage = optuna.storages.InMemoryStorage()
    killed = night(storage, "n1", "2026-11-25T02:00:00+0000")
    trial = killed.ask()
    trial.set_user_attr(WORKER_ATTR, f"{socket.gethostname()}:999999999:t1")  # its sweep's process is gone
    hooks = NightlyHooks(dict(CFG))
    hooks.start(optuna.create_study(study_name="n2", storage=storage), storage, SPACE)
    assert [s.study_name for s in hooks.earlier_studies()] == ["n1"]
    for past in hooks.earlier_studies():  # as the sweep does at the start of the next night
        recover(past, SimpleNamespace(stale_after_s=60.0, max_retries=1), retry=False)
    [closed] = killed.get_trials()  # was left RUNNING for good: a killed night is never resumed
    assert closed.state == TrialState.FAIL and closed.user_attrs["outcome"] == "crashed"
    assert "trial 0 of study 'n1' was left running by a killed sweep: closed as failed\n" in capsys.readouterr().out


def test_nights_are_ordered_by_the_moment_they_started_whatever_their_offsets() -> None:
    storage = optuna.storages.InMemoryStorage()
    night(storage, "late", "2026-11-27T20:00:00-0500")  # 01:00 UTC on the 28th
    night(storage, "early", "2026-11-27T23:30:00+0000")  # as text this one sorted last, so it was "last night"
    assert [s.study_name for s in nightly._earlier_nights(storage, "s", "tonight",
                                                                  "2026-11-28T02:00:00+0000")] == ["late", "early"]


def test_last_nights_answer_crashing_tonight_is_reported_not_given_up_on(tmp_path: Path) -> None:
    """Was: its 5 crashed repeats made the failure policy give up (exit 5, no new configuration), and the next
    night took the same incumbent again and gave up again. Its crashes are data about it: the night searches on
    and says NOT TESTED. A real sweep, through the product's user-objective path (tests/faulty_objective.py)."""
    from conftest import NO_BASELINE, NO_REPORT, REPO, TESTS, pythonpath, run_search
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    env = {"PYTHONPATH": pythonpath(REPO, TESTS), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"}
    night_args = [NO_BASELINE, NO_REPORT, "objective=custom", "objective.callable=faulty_objective:objective",
                  "hydra.sweeper.params=null", "batch_size=choice(16,32,64)", "hydra.sweeper.n_trials=2",
                  "hydra.sweeper.nightly.repeats=5", "hydra.sweeper.nightly.warm_start=0", "hydra.sweeper.seed=0"]
    first = run_search("nightly", "hydra.sweeper.study_name=f1", "hydra.sweep.dir=f1", *night_args, cwd=tmp_path,
                       env=env, timeout_s=300)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "optuna.journal")))
    answer = nightly.night_result(optuna.load_study(study_name="f1", storage=storage), CFG["metric"])
    crashing = ["+fault.kind=raise", f"+fault.on_batch_size={answer.params['batch_size']}"]
    second = run_search("nightly", "hydra.sweeper.study_name=f2", "hydra.sweep.dir=f2", *night_args, *crashing,
                        cwd=tmp_path, env=env, timeout_s=300)
    assert second.returncode == EXIT_NIGHTLY_FAILED and "gave up" not in second.stderr, second.stderr[-2000:]
    report = (tmp_path / "f2" / "report" / "nightly.md").read_text()
    assert "# Nightly f2: UNTESTED" in report and "**NOT TESTED**" in report
    tonight = optuna.load_study(study_name="f2", storage=storage).trials
    assert sum(t.user_attrs.get(NIGHTLY_ROLE_ATTR) == "incumbent" for t in tonight) == 5
    assert sum(t.user_attrs.get(NIGHTLY_ROLE_ATTR) is None and t.user_attrs.get("outcome") == "ok"
               for t in tonight) >= 1


def test_a_night_run_again_leaves_one_verdict_to_filter_on(tmp_path: Path, monkeypatch) -> None:
    """Resumed or re-run, a night reports again on a new MLflow parent run: the earlier report of the same night
    is marked superseded (its verdict kept aside), so `tags.search.nightly.verdict = 'regression'` counts it once;
    another night's report is left alone."""
    from mlflow.tracking import MlflowClient

    from search.tracking import mlflow_runs

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    storage = optuna.storages.InMemoryStorage()
    other = answered(storage, "n1", 1500.0, 0.80)
    tonight = answered(storage, "n2", 1500.0, 0.80)
    runs = {}
    for name, study in (("other", other), ("first", tonight), ("again", tonight)):
        runs[name] = mlflow_runs.start_sweep("nightly-x", study.study_name, {}, {}).parent_run_id
        assert nightly.finish(nightly.Night(CFG, study), [CFG["metric"]], tmp_path / name, runs[name], []) == 0
    client = MlflowClient()
    tags = {name: client.get_run(run_id).data.tags for name, run_id in runs.items()}
    assert tags["again"][nightly.VERDICT] == "ok" and tags["again"][nightly.REGRESSION] == "false"
    assert tags["first"][nightly.VERDICT] == tags["first"][nightly.REGRESSION] == nightly.SUPERSEDED
    assert tags["first"][nightly.SUPERSEDED_VERDICT] == "ok" and tags["first"][nightly.SUPERSEDED_BY] == runs["again"]
    assert tags["other"][nightly.VERDICT] == "ok" and nightly.SUPERSEDED_BY not in tags["other"]
    experiment = client.get_experiment_by_name("nightly-x")
    ok = client.search_runs([experiment.experiment_id], "tags.`search.nightly.verdict` = 'ok'")
    assert sorted(r.info.run_id for r in ok) == sorted([runs["other"], runs["again"]])


def measured(storage: optuna.storages.BaseStorage, name: str, started: str, batch_size: int,
             throughputs: tuple[float, ...], **metrics: float) -> optuna.Study:
    """A night whose answer is `batch_size`, run len(throughputs) times (with `metrics` beside throughput)."""
    done = night(storage, name, started)
    for throughput in throughputs:
        add(done, batch_size, throughput, 0.83, metrics)
    done.set_user_attr(ANSWER_ATTR, {"params": {"batch_size": batch_size}})
    return done


def test_a_night_run_again_compares_with_the_nights_before_it_not_a_later_one(tmp_path: Path) -> None:
    """An operator re-runs 11-26 (killed) after 11-27 ran: its incumbent, its "before" figures, the best ever and
    its warm starts come from 11-25, the night before it. Was: from 11-27, the latest night other than itself."""
    storage = optuna.storages.InMemoryStorage()
    measured(storage, "n1", "2026-11-25T02:00:00+0000", 64, (1400.0, 1410.0, 1390.0))
    killed = night(storage, "n2", "2026-11-26T02:00:00+0000")
    measured(storage, "n3", "2026-11-27T02:00:00+0000", 256, (2600.0, 2610.0, 2590.0))
    again = nightly.start(CFG, killed, storage, SPACE)
    assert [s.study_name for s in again.earlier] == ["n1"] and again.incumbent_night == "n1"
    assert killed.user_attrs[nightly.STARTED] == "2026-11-26T02:00:00+0000"  # it keeps its place in the series
    waiting = killed.get_trials(states=(TrialState.WAITING,))
    assert [t.user_attrs[NIGHTLY_ROLE_ATTR] for t in waiting] == ["incumbent"] * 3  # n3's 256 is no warm start
    for throughput in (1395.0, 1405.0, 1400.0):  # the incumbent's repeats tonight
        add(killed, 64, throughput, 0.83)
    killed.set_user_attr(ANSWER_ATTR, {"params": {"batch_size": 64}})
    assert nightly.finish(again, [CFG["metric"]], tmp_path, None, []) == 0
    report = (tmp_path / "nightly.md").read_text()
    assert "- versus last night's best (n1): 1,400 -> 1,400" in report, report
    assert "- versus the best ever (n1)" in report and "n3" not in report, report
    assert "- throughput_samples_per_s before: 1,400, 1,410, 1,390" in report
    assert "None (same as n1)." in report


def test_the_report_shows_what_else_differed_between_the_compared_runs(tmp_path: Path, monkeypatch) -> None:
    """A slower night whose model doubled its FLOPs and whose runs got about half the CPU: the report said
    "changes since last night: None". It now says both, next to the verdict (the verdict's figures unchanged),
    and the parent run carries them; a night where nothing moved says so in one line."""
    from mlflow.tracking import MlflowClient

    from search.nightly import conditions
    from search.tracking import mlflow_runs

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    storage = optuna.storages.InMemoryStorage()
    before = night(storage, "n1", "2026-11-25T02:00:00+0000")
    for throughput, cpu in ((1400.0, 74.0), (1410.0, 95.0), (1390.0, 88.0)):
        add(before, 64, throughput, 0.83, {"flops_per_sample": 1_124_352.0, "cpu_util_percent_mean": cpu})
    before.set_user_attr(ANSWER_ATTR, {"params": {"batch_size": 64}})
    tonight = optuna.create_study(study_name="n2", storage=storage, direction="maximize")
    state = nightly.start(CFG, tonight, storage, SPACE)
    for trial in tonight.get_trials(states=(TrialState.WAITING,)):
        tonight.tell(tonight.ask(), state=TrialState.FAIL)  # stand-ins for the repeats, added below
    for throughput, cpu in ((700.0, 40.0), (690.0, 57.0), (710.0, 48.0)):
        add(tonight, 64, throughput, 0.83, {"flops_per_sample": 2_238_464.0, "cpu_util_percent_mean": cpu})
    tonight.set_user_attr(ANSWER_ATTR, {"params": {"batch_size": 64}})
    run_id = mlflow_runs.start_sweep("nightly-x", "n2", {}, {}).parent_run_id
    assert nightly.finish(state, [CFG["metric"]], tmp_path, run_id, []) == nightly.EXIT_REGRESSION
    report = (tmp_path / "nightly.md").read_text()
    assert "- median -50.0% (3 repeats tonight vs 3 before), one-sided Welch" in report  # not re-normalised
    assert ("- model FLOPs per sample changed: 1,124,352 -> 2,238,464 (+99%): the model itself changed (code or "
            "configuration, not noise)") in report, report
    assert ("- CPU share (median cpu_util_percent_mean, % of one core): 88 -> 48 (-45%): the runs got less CPU "
            "tonight (a busier machine, fewer cores or threads) or waited more") in report, report
    assert "still differed in flops_per_sample, cpu_util_percent_mean: see Regressions" in report
    run = MlflowClient().get_run(run_id)
    assert run.data.tags[conditions.CONDITIONS_MOVED_TAG] == "flops_per_sample,cpu_util_percent_mean"
    assert run.data.metrics["nightly_incumbent_flops_per_sample_tonight"] == 2_238_464.0
    assert run.data.metrics["nightly_incumbent_cpu_util_percent_mean_before"] == 88.0
    quiet = conditions.differences(state.incumbent, state.incumbent)
    assert conditions.lines(quiet) == ["nothing else moved between the compared runs (flops_per_sample "
                                       "1,124,352 -> 1,124,352; cpu_util_percent_mean 88 -> 88)"]
    assert conditions.run_figures(quiet)[0] == {conditions.CONDITIONS_MOVED_TAG: "none"}


def test_a_cpu_share_moves_only_past_both_thresholds() -> None:
    from search.nightly.conditions import _util_moved

    assert _util_moved(88.0, 48.0)  # -45%, 40 points
    assert not _util_moved(88.0, 80.0)  # 8 points
    assert not _util_moved(400.0, 360.0)  # 40 points but 10% (four threads' worth of a core each)
    assert not _util_moved(8.0, 5.0)  # a paced run's few percent: -38% but 3 points


def test_a_killed_nights_parent_run_is_superseded_by_its_resumed_report(tmp_path: Path, monkeypatch) -> None:
    """A night killed before its report leaves its parent run KILLED, tagged search.nightly=true with no verdict;
    was left so after the resumed night reported, and `tags.search.nightly = 'true'` listed the night twice, once
    without a verdict. A night's parent run still running (another worker) is left alone."""
    from mlflow.tracking import MlflowClient

    from search.tracking import mlflow_runs

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    storage = optuna.storages.InMemoryStorage()
    tonight = answered(storage, "n2", 1500.0, 0.80)
    started = {"search.nightly": "true", nightly.SERIES: "s"}  # what a night's parent run is made with
    client = MlflowClient()
    killed, failed, running, again = (mlflow_runs.start_sweep("nightly-x", "n2", {}, started).parent_run_id
                                      for _ in range(4))
    client.set_terminated(killed, status="KILLED")  # as the resumed night's start closes what it left running
    client.set_terminated(failed, status="FAILED")  # gave up on failing trials, before its report
    client.set_terminated(again, status="FINISHED")  # the sweeper ends its parent run before the report
    assert nightly.finish(nightly.Night(CFG, tonight), [CFG["metric"]], tmp_path, again, []) == 0
    tags = {name: client.get_run(run_id).data.tags for name, run_id in
            (("killed", killed), ("failed", failed), ("running", running), ("again", again))}
    for name, status in (("killed", "KILLED"), ("failed", "FAILED")):
        assert tags[name][nightly.VERDICT] == tags[name][nightly.REGRESSION] == nightly.SUPERSEDED, tags[name]
        assert tags[name][nightly.SUPERSEDED_VERDICT] == f"none ({status})"
        assert tags[name][nightly.SUPERSEDED_BY] == again
    assert nightly.VERDICT not in tags["running"] and tags["again"][nightly.VERDICT] == "ok"
    experiment = client.get_experiment_by_name("nightly-x")
    ended = client.search_runs([experiment.experiment_id], "tags.`search.nightly` = 'true' and "
                               "attributes.status != 'RUNNING'")
    assert all(nightly.VERDICT in r.data.tags for r in ended) and len(ended) == 3


def _tonight(storage: optuna.storages.BaseStorage, name: str, started: str, cfg: dict | None = None,
             **speeds: float) -> tuple[optuna.Study, nightly.Night]:
    """A night started (start()), its enqueued repeats run at `speeds` (batch size -> samples/s, `b64=...`, with
    a little spread) and its answer batch_size=64."""
    study = night(storage, name, started)
    state = nightly.start(cfg or CFG, study, storage, SPACE)
    for i, trial in enumerate(study.get_trials(states=(TrialState.WAITING,))):
        asked = study.ask(SPACE)
        speed = speeds[f"b{asked.params['batch_size']}"] * (1 + 0.01 * (i % 3))
        asked.set_user_attr("outcome", "ok")
        asked.set_user_attr("metrics", {"throughput_samples_per_s": speed, "val_accuracy": 0.83})
        study.tell(asked, speed)
    study.set_user_attr(ANSWER_ATTR, {"params": {"batch_size": 64}})
    return study, state


def test_a_regression_stands_until_a_night_measures_it_back_at_its_old_speed(tmp_path: Path) -> None:
    """Was: the night after a regression took the slow night's answer as its incumbent, compared slow with slow
    and said OK (exit 0) while the slowdown was still there. Now it is tested against the last fast night until
    it recovers."""
    from search.errors import EXIT_REGRESSION

    storage = optuna.storages.InMemoryStorage()
    measured(storage, "n1", "2026-11-25T02:00:00+0000", 64, (1400.0, 1410.0, 1390.0))
    slow, state = _tonight(storage, "n2", "2026-11-26T02:00:00+0000", b64=700.0, b256=2000.0)
    assert nightly.finish(state, [CFG["metric"]], tmp_path / "n2", None, []) == EXIT_REGRESSION
    assert slow.user_attrs[nightly.STANDING] == {"params": {"batch_size": 64}, "night": "n1", "since": "n2"}

    still, state = _tonight(storage, "n3", "2026-11-27T02:00:00+0000", b64=700.0, b256=2000.0)
    assert state.standing_night == "n1" and state.standing_since == "n2"
    assert [t.user_attrs[NIGHTLY_ROLE_ATTR] for t in still.trials].count("standing") == 0  # 64 is the incumbent too
    assert nightly.finish(state, [CFG["metric"]], tmp_path / "n3", None, []) == EXIT_REGRESSION
    report = (tmp_path / "n3" / "nightly.md").read_text()
    assert "# Nightly n3: REGRESSION" in report and "No regression: last night's best (n2" in report  # slow = slow
    assert "**STILL A REGRESSION** since n2: `batch_size=64` is still slower than on n1" in report, report
    assert "hydra.sweeper.nightly.accept_slowdown=true" in report
    assert still.user_attrs[nightly.STANDING]["since"] == "n2"

    back, state = _tonight(storage, "n4", "2026-11-28T02:00:00+0000", b64=1400.0, b256=2000.0)
    assert nightly.finish(state, [CFG["metric"]], tmp_path / "n4", None, []) == 0
    report = (tmp_path / "n4" / "nightly.md").read_text()
    assert "Recovered: `batch_size=64`, slower since n2, is back to its speed of n1" in report, report
    assert nightly.STANDING not in back.user_attrs
    _, state = _tonight(storage, "n5", "2026-11-29T02:00:00+0000", b64=1400.0, b256=2000.0)
    assert state.standing is None


def test_a_standing_regression_of_another_configuration_is_measured_again_or_accepted(tmp_path: Path) -> None:
    from search.errors import EXIT_REGRESSION

    storage = optuna.storages.InMemoryStorage()
    measured(storage, "n1", "2026-11-25T02:00:00+0000", 64, (1400.0, 1410.0, 1390.0))
    slow, state = _tonight(storage, "n2", "2026-11-26T02:00:00+0000", b64=700.0, b256=2000.0)
    for throughput in (2000.0, 2010.0, 1990.0):  # the slow night answered another configuration
        add(slow, 256, throughput, 0.83)
    slow.set_user_attr(ANSWER_ATTR, {"params": {"batch_size": 256}})
    assert nightly.finish(state, [CFG["metric"]], tmp_path / "n2", None, []) == EXIT_REGRESSION
    still, state = _tonight(storage, "n3", "2026-11-27T02:00:00+0000", b64=700.0, b256=2000.0)
    roles = [t.user_attrs[NIGHTLY_ROLE_ATTR] for t in still.trials]
    assert roles == ["incumbent"] * 3 + ["standing"] * 3  # 256, then 64 (no warm start: both measured again)
    assert [t.params["batch_size"] for t in still.trials if t.user_attrs[NIGHTLY_ROLE_ATTR] == "standing"] == [64] * 3
    assert nightly.finish(state, [CFG["metric"]], tmp_path / "n3", None, []) == EXIT_REGRESSION

    accepting = {**CFG, "accept_slowdown": True}
    accepted, state = _tonight(storage, "n4", "2026-11-28T02:00:00+0000", accepting, b64=700.0, b256=2000.0)
    assert "standing" not in [t.user_attrs[NIGHTLY_ROLE_ATTR] for t in accepted.trials]
    assert nightly.finish(state, [CFG["metric"]], tmp_path / "n4", None, []) == 0
    report = (tmp_path / "n4" / "nightly.md").read_text()
    assert "Accepted: the regression since n2 (`batch_size=64`, slower than on n1) is no longer tested" in report
    assert nightly.STANDING not in accepted.user_attrs


def test_a_standing_regression_not_measured_tonight_is_untested_and_handed_on(tmp_path: Path) -> None:
    """Its repeats all failed tonight: not a fine night (exit 5), and the next night tests it again."""
    storage = optuna.storages.InMemoryStorage()
    measured(storage, "n1", "2026-11-25T02:00:00+0000", 64, (1400.0, 1410.0, 1390.0))
    slow, state = _tonight(storage, "n2", "2026-11-26T02:00:00+0000", b64=700.0, b256=2000.0)
    for throughput in (2000.0, 2010.0, 1990.0):  # it answered batch_size=256
        add(slow, 256, throughput, 0.83)
    slow.set_user_attr(ANSWER_ATTR, {"params": {"batch_size": 256}})
    nightly.finish(state, [CFG["metric"]], tmp_path / "n2", None, [])
    tonight = night(storage, "n3", "2026-11-27T02:00:00+0000")
    state = nightly.start(CFG, tonight, storage, SPACE)
    for trial in tonight.get_trials(states=(TrialState.WAITING,)):
        asked = tonight.ask(SPACE)
        if asked.user_attrs[NIGHTLY_ROLE_ATTR] == "standing":  # batch_size=64 crashed every time
            tonight.tell(asked, state=TrialState.FAIL)
            continue
        asked.set_user_attr("outcome", "ok")
        asked.set_user_attr("metrics", {"throughput_samples_per_s": 2000.0, "val_accuracy": 0.83})
        tonight.tell(asked, 2000.0)
    tonight.set_user_attr(ANSWER_ATTR, {"params": {"batch_size": 256}})
    assert nightly.finish(state, [CFG["metric"]], tmp_path / "n3", None, []) == EXIT_NIGHTLY_FAILED
    report = (tmp_path / "n3" / "nightly.md").read_text()
    assert "# Nightly n3: UNTESTED" in report
    assert "**NOT TESTED**: the regression since n2 (`batch_size=64`, against n1) was not measured again" in report
    assert tonight.user_attrs[nightly.STANDING] == {"params": {"batch_size": 64}, "night": "n1", "since": "n2"}
    assert nightly.start(CFG, night(storage, "n4", "2026-11-28T02:00:00+0000"), storage, SPACE).standing_since == "n2"

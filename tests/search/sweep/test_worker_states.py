"""Workers on one study (search/sweep/workers.py): who enqueues the baseline and who confirms the answer.
Real Optuna studies; another worker is an entry written as that worker would write it (another host:
judged by its beat; this host: by its process)."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import optuna
import pytest

from search.record import CONFIRMER_ATTR, WORKER_STATE_PREFIX
from search.sweep import workers
from search.sweep.recovery import worker_id

GRACE_S = 120.0


@pytest.fixture()
def study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(directions=["maximize", "maximize"])


def other(study: optuna.Study, worker: str, state: str, since: float, beat: float) -> None:
    study._storage.set_study_system_attr(study._study_id, WORKER_STATE_PREFIX + worker,
                                         {"state": state, "since_unix_s": since, "beat_unix_s": beat})


def test_a_worker_alone_enqueues_the_baseline_and_confirms_without_waiting(study: optuna.Study) -> None:
    workers.mark(study, "searching")
    assert workers.enqueues_baseline(study, GRACE_S)
    workers.mark(study, "done")
    start = time.monotonic()
    assert workers.claims_confirmation(study, GRACE_S)
    assert time.monotonic() - start < workers.CLAIM_SETTLE_S / 2


def test_a_worker_still_searching_on_another_host_confirms_later(study: optuna.Study) -> None:
    now = time.time()
    other(study, "elsewhere:12:t1", "searching", since=now - 30, beat=now - 5)
    workers.mark(study, "searching")
    assert not workers.enqueues_baseline(study, GRACE_S)  # it registered first
    workers.mark(study, "done")
    assert workers.others_searching(study, GRACE_S) == ["elsewhere:12:t1"]
    assert not workers.claims_confirmation(study, GRACE_S)


def test_a_silent_or_gone_worker_is_not_waited_for(study: optuna.Study) -> None:
    now = time.time()
    other(study, "elsewhere:12:t1", "searching", since=now - 600, beat=now - GRACE_S - 1)  # no beat for too long
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    other(study, f"{socket.gethostname()}:{gone.pid}:t1", "searching", since=now - 60, beat=now)  # this host, exited
    workers.mark(study, "searching")
    assert workers.enqueues_baseline(study, GRACE_S)
    workers.mark(study, "done")
    assert workers.others_searching(study, GRACE_S) == []
    assert workers.claims_confirmation(study, GRACE_S, settle_s=0.01)


def test_an_earlier_sweeps_worker_is_not_waited_for(study: optuna.Study) -> None:
    now = time.time()
    other(study, "elsewhere:12:t1", "done", since=now - 60, beat=now - 1)  # ended before this worker started
    workers.mark(study, "searching")
    workers.mark(study, "done")
    start = time.monotonic()
    assert workers.claims_confirmation(study, GRACE_S)
    assert time.monotonic() - start < workers.CLAIM_SETTLE_S / 2


def test_two_workers_ending_together_one_confirms(study: optuna.Study) -> None:
    workers.mark(study, "searching")
    time.sleep(0.01)
    other(study, "elsewhere:12:t1", "done", since=time.time() - 60, beat=time.time())  # active while this one ran
    workers.mark(study, "done")
    assert workers.claims_confirmation(study, GRACE_S, settle_s=0.01)  # the other did not claim: ours stands
    assert study._storage.get_study_system_attrs(study._study_id)[CONFIRMER_ATTR]["worker"] == worker_id()

    def the_other_claims_too() -> None:
        time.sleep(0.05)
        study._storage.set_study_system_attr(study._study_id, CONFIRMER_ATTR,
                                             {"worker": "elsewhere:12:t1", "at_unix_s": time.time()})

    thread = threading.Thread(target=the_other_claims_too)
    thread.start()
    assert not workers.claims_confirmation(study, GRACE_S, settle_s=0.5)  # its claim landed last
    thread.join()


@pytest.mark.parametrize("state", ["searching", "confirming"])
def test_the_beat_refreshes_a_searching_or_confirming_entry_not_a_done_one(study: optuna.Study, state: str) -> None:
    workers.mark(study, state)
    first = workers._entries(study)[worker_id()]
    time.sleep(0.01)
    workers.beat(study)
    second = workers._entries(study)[worker_id()]
    assert second["beat_unix_s"] > first["beat_unix_s"] and second["since_unix_s"] == first["since_unix_s"]
    assert second["state"] == state
    workers.mark(study, "done")
    workers.beat(study)
    assert workers._entries(study)[worker_id()]["state"] == "done"


def test_a_worker_joining_during_the_confirmation_waits_for_it(study: optuna.Study) -> None:
    """Another worker confirms (its rounds are enqueued trials this one would take): this one waits, says so
    once, and goes on when that worker is done; one that stopped beating on another host is not waited for."""
    now = time.time()
    other(study, "elsewhere:12:t1", "confirming", since=now - 60, beat=now)
    workers.mark(study, "searching")
    said: list[str] = []

    def the_other_ends() -> None:
        time.sleep(0.5)
        other(study, "elsewhere:12:t1", "done", since=now - 60, beat=time.time())

    thread = threading.Thread(target=the_other_ends)
    thread.start()
    waited_s = workers.wait_while_confirming(study, GRACE_S, said.append, poll_s=0.05)
    thread.join()
    assert waited_s >= 0.4 and len(said) == 1 and said[0].startswith("waiting: worker elsewhere:12:t1 is confirming")
    other(study, "elsewhere:12:t1", "confirming", since=now - 600, beat=now - GRACE_S - 1)  # killed mid-way
    assert workers.wait_while_confirming(study, GRACE_S, said.append, poll_s=0.05) == 0.0 and len(said) == 1


def test_a_worker_about_to_confirm_sees_one_that_joined(study: optuna.Study) -> None:
    """The confirmer marks itself confirming before it looks: a worker that registered before the look is
    seen searching (the confirmation is left to it); one that registers after sees the mark and waits."""
    workers.mark(study, "confirming")
    now = time.time()
    other(study, "elsewhere:12:t1", "searching", since=now, beat=now)  # joined just now
    assert workers.others_searching(study, GRACE_S) == ["elsewhere:12:t1"]
    assert not workers.claims_confirmation(study, GRACE_S)


def test_a_live_confirming_workers_rounds_are_not_dropped_a_stopped_ones_are(study: optuna.Study) -> None:
    """A worker that starts drops the rounds a stopped sweep's confirmation left enqueued, but not those of a
    worker confirming now: they are waiting for it (before, a worker joining then closed one as failed and the
    confirming worker ran a search proposal in its place)."""
    from optuna.trial import TrialState

    from search.sweep.roles import enqueue

    now = time.time()
    other(study, "elsewhere:12:t1", "confirming", since=now - 60, beat=now)
    enqueue(study, {"x": 1}, "confirm", **{"search.confirm_round": 0})
    workers.mark(study, "searching")
    assert workers.drop_stopped_confirmation(study, GRACE_S) == 0
    assert [t.state for t in study.trials] == [TrialState.WAITING]
    other(study, "elsewhere:12:t1", "confirming", since=now - 600, beat=now - GRACE_S - 1)  # stopped mid-way
    assert workers.drop_stopped_confirmation(study, GRACE_S) == 1
    assert [t.state for t in study.trials] == [TrialState.FAIL]


def test_every_worker_reads_the_same_first_registration(study: optuna.Study) -> None:
    """The study's id for MLflow (search/sweep/study.py study_identity) is made from it: workers started together
    make the same one."""
    assert workers.first_registration(study) == ""
    now = time.time()
    workers.mark(study, "searching")
    other(study, "elsewhere:7:1", "searching", now - 5.0, now)
    other(study, "later:8:1", "done", now + 5.0, now)
    assert workers.first_registration(study) == f"elsewhere:7:1@{now - 5.0:.6f}"

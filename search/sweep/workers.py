"""Several workers on one study: who enqueues the baseline, and who confirms the answer.

Each worker (docs/scale.md) keeps an entry on the study, a study system
attribute `search.worker_state:<worker>`: `searching` from its start, with a
beat the heartbeat thread refreshes (search/sweep/recovery.py), then `done`
when its own trials ended, however they ended.

- **The baseline** is enqueued by the worker that registered first among the
  live searching ones, so workers started together do not each enqueue it.
- **The confirmation** (search/sweep/confirm.py) runs once per study, by the
  last worker to finish searching. Its rounds are enqueued trials, and any
  worker still searching would take them as its next trial: rounds measured
  by another worker, out of the interleaved order, counted in that worker's
  search, while the confirming one ran the others' proposals instead. A
  worker that ends while another is searching leaves the confirmation to it.
  Every worker marks itself done before it looks, so the last one to look
  sees all the others done. Two that look at the same moment both claim it
  (`search.confirming_worker`); after a pause the last claim written wins.
- **A worker that joins during the confirmation** (started late, or the next
  of a batch of jobs) would take its rounds the same way, and the trials it
  enqueues on start (the baseline's runs, nightly's repeats, a killed
  trial's retry) would be taken by the confirmer as rounds: Optuna hands
  out waiting trials oldest first. The worker that is about to confirm
  marks itself `confirming` before it looks for workers still searching,
  and every worker marks itself `searching` and then looks for one
  `confirming` before it enqueues anything and before each trial it asks
  for, so of two that meet, at least one sees the other: the joiner waits
  until the confirmation is over, or the confirmer sees it searching and
  leaves the confirmation to it. The confirmer also sets aside any waiting
  trial that is not its own before each of its runs (search/sweep/roles.py).

A worker is live while its process runs (this host) or its beat is younger
than `hydra.sweeper.stale_after_s` (another host), as for its trials.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import optuna

from search.record import CONFIRMER_ATTR, WORKER_STATE_PREFIX
from search.sweep.recovery import worker_alive, worker_id
from search.sweep.roles import drop_unrun, put_back_stranded

CLAIM_SETTLE_S = 2.0  # longer than two workers' claims can land apart once both looked


def _entries(study: optuna.Study) -> dict[str, dict[str, Any]]:
    attrs = study._storage.get_study_system_attrs(study._study_id)
    return {k[len(WORKER_STATE_PREFIX):]: v for k, v in attrs.items()
            if k.startswith(WORKER_STATE_PREFIX) and isinstance(v, dict)}


def mark(study: optuna.Study, state: str) -> None:
    """This worker's entry: `searching` (its registration time kept), `confirming` or `done`."""
    me = worker_id()
    since = _entries(study).get(me, {}).get("since_unix_s", time.time())
    study._storage.set_study_system_attr(study._study_id, WORKER_STATE_PREFIX + me,
                                         {"state": state, "since_unix_s": since, "beat_unix_s": time.time()})


def registered_unix_s(study: optuna.Study) -> float | None:
    """When this worker registered on the study (its first `mark`, at its start); None before."""
    since = _entries(study).get(worker_id(), {}).get("since_unix_s")
    return None if since is None else float(since)


def first_registration(study: optuna.Study) -> str:
    """The study's first registered worker and when it registered: the same for every worker that reads it once
    registered itself (a later one registers later); '' before any."""
    entries = sorted((float(e.get("since_unix_s", 0.0)), w) for w, e in _entries(study).items())
    return f"{entries[0][1]}@{entries[0][0]:.6f}" if entries else ""


def beat(study: optuna.Study) -> None:
    """Refresh this worker's beat while it searches or confirms (the heartbeat thread)."""
    entry = _entries(study).get(worker_id())
    if entry is not None and entry.get("state") in ("searching", "confirming"):
        mark(study, entry["state"])


def _live(worker: str, entry: dict[str, Any], grace_s: float, now: float) -> bool:
    alive = worker_alive(worker)
    return alive is True or (alive is None and now - float(entry.get("beat_unix_s", 0.0)) <= grace_s)


def _others(study: optuna.Study, state: str, grace_s: float) -> list[str]:
    me, now = worker_id(), time.time()
    return [w for w, e in _entries(study).items() if w != me and e.get("state") == state and _live(w, e, grace_s, now)]


def others_searching(study: optuna.Study, grace_s: float) -> list[str]:
    """The other live workers still searching this study."""
    return _others(study, "searching", grace_s)


def others_confirming(study: optuna.Study, grace_s: float) -> list[str]:
    """The other live workers confirming this study's answer (or about to look whether they do)."""
    return _others(study, "confirming", grace_s)


def drop_stopped_confirmation(study: optuna.Study, grace_s: float) -> int:
    """Close the rounds a stopped sweep's confirmation enqueued and never ran (roles.drop_unrun), and enqueue
    again the trials it set aside for them (roles.put_back_stranded); neither while another live worker
    confirms: those are its own. How many rounds were closed."""
    if others_confirming(study, grace_s):
        return 0
    put_back_stranded(study)
    return drop_unrun(study)


def wait_while_confirming(study: optuna.Study, grace_s: float, say: Callable[[str], None],
                          poll_s: float = 1.0) -> float:
    """Before this worker enqueues anything or asks for a trial: wait while another worker confirms the answer,
    whose rounds are enqueued trials this worker would take, and which would take this worker's enqueued trials
    (the baseline, nightly's repeats, a retry) as its rounds. This worker's beat goes on meanwhile. When the
    confirmer stopped instead of finishing (killed), the rounds it left waiting are closed. The seconds waited."""
    started = None
    while others := others_confirming(study, grace_s):
        if started is None:
            started = time.monotonic()
            say(f"waiting: worker {others[0]} is confirming this study's answer in interleaved rounds that no "
                f"other worker may take; this worker's trials go on when it is done")
        time.sleep(poll_s)
        beat(study)
    if started is None:
        return 0.0
    if dropped := drop_stopped_confirmation(study, grace_s):
        say(f"the confirming worker stopped: {dropped} confirmation trial(s) it left waiting closed, unrun")
    return time.monotonic() - started


def enqueues_baseline(study: optuna.Study, grace_s: float) -> bool:
    """Whether this worker enqueues the baseline: it registered first among the live searching workers."""
    me, now = worker_id(), time.time()
    entries = _entries(study)
    mine = entries.get(me, {}).get("since_unix_s", now)
    return not any(w != me and e.get("state") == "searching" and _live(w, e, grace_s, now)
                   and (e.get("since_unix_s", now), w) < (mine, me) for w, e in entries.items())


def claims_confirmation(study: optuna.Study, grace_s: float, settle_s: float = CLAIM_SETTLE_S) -> bool:
    """Whether this worker confirms the answer; call after mark(study, "done"). When none still searches:
    at once if no other worker was active on the study since this one started (alone, or after an
    earlier sweep), otherwise if its claim is the one left after `settle_s`."""
    if others_searching(study, grace_s):
        return False
    me, entries = worker_id(), _entries(study)
    since = float(entries.get(me, {}).get("since_unix_s", time.time()))
    if not any(w != me and float(e.get("beat_unix_s", 0.0)) >= since for w, e in entries.items()):
        return True
    now = time.time()
    study._storage.set_study_system_attr(study._study_id, CONFIRMER_ATTR, {"worker": me, "at_unix_s": now})
    time.sleep(settle_s)
    return study._storage.get_study_system_attrs(study._study_id).get(CONFIRMER_ATTR, {}).get("worker") == me

"""Device slots on one machine (search/trial/slots.py), on a CPU with pretend
slots: a slot takes the next trial as soon as its last one ends, so with two
slots and trials of different lengths no slot waits while trials remain; a
trial with parallel.devices=2 takes both slots and runs alone."""
from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from conftest import run_search
from search.errors import BadInput
from search.trial.slots import Slot, cuda_visible_devices, make_slots, take

def test_slots_take_different_gpus() -> None:
    slots = make_slots(4, trials_per_gpu=2, gpu_count=2)  # two trials per GPU, asked for explicitly
    assert [s.gpu for s in slots] == ["0", "1", "0", "1"]
    assert take([slots[0], slots[2], slots[3]], 2) == [slots[0], slots[3]]  # never GPU 0 twice for one trial
    assert take([slots[0], slots[2]], 2) is None  # wait rather than put two ranks on one GPU
    assert cuda_visible_devices([slots[1], slots[2]]) == "1,0"
    assert make_slots("auto", 1, 0) == [Slot(0, None)] and make_slots("auto", 1, 3)[2] == Slot(2, "2")
    assert cuda_visible_devices(make_slots(2, 1, 0)) is None  # pretend slots on a CPU set nothing
    for setting, per_gpu, gpus in [(3, 1, 2), (0, 1, 0), ("many", 1, 1), (1, 0, 1)]:
        with pytest.raises(BadInput, match="hydra.sweeper"):
            make_slots(setting, per_gpu, gpus)


def test_two_slots_never_idle_while_trials_remain(workdir: Path) -> None:
    journal = str(workdir / "optuna.journal")
    study = optuna.create_study(study_name="digits", storage=JournalStorage(JournalFileBackend(journal)),
                                directions=["maximize", "maximize"])
    enqueued = [(500, 2), (4000, 1), (500, 1), (500, 1)]  # one DDP trial, then a long one and two short ones
    for budget, devices in enqueued:
        study.enqueue_trial({"train.budget_samples": budget, "parallel.devices": devices})
    result = run_search("multirun", "hydra.sweeper.slots=2", f"hydra.sweeper.n_trials={len(enqueued)}",
                        "hydra.sweeper.params=null", "train.budget_samples=choice(500,4000)",
                        "parallel.devices=choice(1,2)", "loader.num_workers=0", cwd=workdir)
    assert result.returncode == 0, result.stderr[-3000:]

    trials = sorted(optuna.load_study(study_name="digits", storage=JournalStorage(JournalFileBackend(journal))).trials,
                    key=lambda t: t.number)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * len(enqueued), [t.user_attrs for t in trials]
    span = {t.number: (t.user_attrs["search.launched_unix_s"], t.user_attrs["search.ended_unix_s"]) for t in trials}
    ddp, long, short_a, short_b = trials
    assert ddp.user_attrs["search.slots"] == "0,1"  # parallel.devices=2 takes two slots
    assert all(span[t.number][0] >= span[ddp.number][1] for t in trials[1:])  # and runs alone
    assert {long.user_attrs["search.slots"], short_a.user_attrs["search.slots"]} == {"0", "1"}
    # the short trials follow each other on one slot while the long trial holds the other: no batch barrier
    assert span[short_b.number][0] < span[long.number][1], span
    assert short_b.user_attrs["search.slots"] == short_a.user_attrs["search.slots"]

    idle_s, waited_for = {}, []
    ends = sorted(end for _, end in span.values())
    for slot in ("0", "1"):
        mine = sorted((span[t.number] for t in trials if slot in t.user_attrs["search.slots"].split(",")))
        idle_s[slot] = [round(nxt[0] - prev[1], 3) for prev, nxt in zip(mine, mine[1:])]
        # idle only for the sweep's bookkeeping, never until another trial ends (a batch barrier)
        waited_for += [end for prev, nxt in zip(mine, mine[1:]) for end in ends if prev[1] < end < nxt[0]]
    print(f"slot idle between trials, s: {idle_s}")
    assert waited_for == [], (idle_s, span)

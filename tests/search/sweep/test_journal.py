"""A damaged study journal is repaired or refused on start, never silently
losing completed trials."""
from __future__ import annotations

import os
import time
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from conftest import run_search
from search.errors import BadInput
from search.sweep.study import open_storage


def journal_with_trials(path: Path, n: int) -> None:
    study = optuna.create_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(path))))
    for i in range(n):
        study.add_trial(optuna.trial.create_trial(params={"x": float(i)},
                                                  distributions={"x": optuna.distributions.FloatDistribution(0, 9)},
                                                  value=float(i)))


def test_truncated_last_record_is_removed_with_a_copy_and_no_completed_trial_lost(tmp_path: Path, capsys) -> None:
    path = tmp_path / "optuna.journal"
    journal_with_trials(path, 3)
    with open(path, "ab") as f:
        f.write(b'{"op_code": 4, "worker_id": "x", "trial_id": 9')  # a write cut off by SIGKILL
    storage = open_storage(str(path))
    assert "partial record" in capsys.readouterr().out
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.value for t in study.trials] == [0.0, 1.0, 2.0]
    study.add_trial(optuna.trial.create_trial(params={"x": 5.0},
                                              distributions={"x": optuna.distributions.FloatDistribution(0, 9)},
                                              value=5.0))
    reread = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(path))))
    assert [t.value for t in reread.trials] == [0.0, 1.0, 2.0, 5.0]
    assert len(list(tmp_path.glob("optuna.journal.damaged-*"))) == 1


def test_a_corrupt_record_in_the_middle_is_refused_not_dropped(tmp_path: Path) -> None:
    path = tmp_path / "optuna.journal"
    journal_with_trials(path, 2)
    lines = path.read_bytes().split(b"\n")
    lines[1] = b"garbage"
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    with pytest.raises(BadInput, match="line 2 is not one"):
        open_storage(str(path))
    assert path.read_bytes() == before


def test_a_stale_lock_is_removed_on_start(tmp_path: Path, capsys) -> None:
    path = tmp_path / "optuna.journal"
    journal_with_trials(path, 1)
    lock = Path(f"{path}.lock")
    os.symlink(path, lock)
    old = time.time() - 60
    os.utime(lock, (old, old), follow_symlinks=False)
    started = time.perf_counter()
    storage = open_storage(str(path))
    assert time.perf_counter() - started < 5
    assert "stale lock" in capsys.readouterr().out
    assert len(optuna.load_study(study_name="s", storage=storage).trials) == 1


@pytest.mark.parametrize("record, why", [
    (b"42", "JSON int, not an object"),
    (b"[]", "JSON list, not an object"),
    (b'{"op_code": 99, "worker_id": "w"}', "op_code 99 is none of"),
    (b'{"op_code": 4, "worker_id": "w"}', "op_code 4 without study_id, datetime_start"),
])
def test_valid_json_that_is_no_record_is_refused_with_its_line(tmp_path: Path, record: bytes, why: str) -> None:
    path = tmp_path / "optuna.journal"
    journal_with_trials(path, 2)
    lines = path.read_bytes().split(b"\n")
    lines.insert(1, record)
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    with pytest.raises(BadInput, match=f"line 2 is not one \\({why}"):
        open_storage(str(path))
    assert path.read_bytes() == before


def test_the_command_line_refuses_a_journal_record_in_one_line_with_exit_2(workdir: Path) -> None:
    path = workdir / "optuna.journal"
    journal_with_trials(path, 1)
    path.write_bytes(path.read_bytes() + b"42\n")
    before = path.read_bytes()
    result = run_search("multirun", cwd=workdir, timeout_s=120)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "line 3 is not one (JSON int" in lines[0] and "fix:" in lines[0], result.stderr
    assert path.read_bytes() == before and not (workdir / "multirun").exists()

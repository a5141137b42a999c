"""A damaged journal file is repaired or refused on start, never read past.

Optuna's journal reader skips a final line without a newline (a write cut
off by a kill) but the next append would glue a new record onto it and
corrupt the file for good; a lock left by a killed process stalls every
writer for Optuna's 30 s grace period. Both are handled before the study
opens, with a copy of the original kept. A complete line that is not a
record Optuna can replay (not JSON, or JSON such as `42` or an unknown
`op_code`, which Optuna would meet with a KeyError or an assert) is refused
with its line number, the file left as it is.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from optuna.storages.journal import JournalFileSymlinkLock
from optuna.storages.journal._storage import JournalOperation

from search.errors import BadInput

STALE_LOCK_AGE_S = 10.0  # a journal append holds the lock for milliseconds
# The fields Optuna's replay (JournalStorage's apply_logs) reads unconditionally, per operation.
_FIELDS = {
    JournalOperation.CREATE_STUDY: ("study_name", "directions"),
    JournalOperation.DELETE_STUDY: ("study_id",),
    JournalOperation.SET_STUDY_USER_ATTR: ("study_id", "user_attr"),
    JournalOperation.SET_STUDY_SYSTEM_ATTR: ("study_id", "system_attr"),
    JournalOperation.CREATE_TRIAL: ("study_id", "datetime_start"),
    JournalOperation.SET_TRIAL_PARAM: ("trial_id", "param_name", "param_value_internal", "distribution"),
    JournalOperation.SET_TRIAL_STATE_VALUES: ("trial_id", "state", "values"),
    JournalOperation.SET_TRIAL_INTERMEDIATE_VALUE: ("trial_id", "step", "intermediate_value"),
    JournalOperation.SET_TRIAL_USER_ATTR: ("trial_id", "user_attr"),
    JournalOperation.SET_TRIAL_SYSTEM_ATTR: ("trial_id", "system_attr"),
    JournalOperation.DISCARD_TRIALS: (),
}


def check_journal(path: Path) -> list[str]:
    """Repair what is safe to repair; return one line per repair made."""
    notes = []
    lock = Path(f"{path}.lock")
    if lock.is_symlink() and time.time() - os.lstat(lock).st_mtime > STALE_LOCK_AGE_S:
        lock.unlink(missing_ok=True)
        notes.append(f"removed a stale lock {lock} left by a killed process")
    if not path.is_file() or path.stat().st_size == 0:
        return notes
    # Under the writers' own lock: a partial line seen then is no append in flight.
    lock_obj = JournalFileSymlinkLock(str(path))
    lock_obj.acquire()
    try:
        return notes + _repair(path)
    finally:
        lock_obj.release()


def _repair(path: Path) -> list[str]:
    notes = []
    data = path.read_bytes()
    complete, _, partial = data.rpartition(b"\n")
    for number, line in enumerate(complete.split(b"\n"), start=1):
        why = _not_a_record(line)
        if why:
            raise BadInput(f"the study journal must hold one Optuna journal record (a JSON object with a known op_code "
                           f"and its fields) per line; {path} line {number} is not one ({why}); "
                           f"fix: restore the file from a backup or move it away to start a new study")
    if partial:
        backup = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(path, backup)
        with open(path, "r+b") as f:
            f.truncate(len(complete) + 1)
        notes.append(f"the study journal ended in a partial record ({len(partial)} bytes, a write cut off by a kill): "
                     f"removed it, kept every complete record, original copied to {backup}")
    return notes


def _not_a_record(line: bytes) -> str:
    """Why Optuna could not replay this line, or "" when it can."""
    try:
        record = json.loads(line)
    except ValueError:
        return "not JSON"
    if not isinstance(record, dict):
        return f"JSON {type(record).__name__}, not an object"
    op = record.get("op_code")
    if isinstance(op, bool) or not isinstance(op, int) or op not in _FIELDS:
        return f"op_code {op!r} is none of Optuna's {min(_FIELDS):d}..{max(_FIELDS):d}"
    missing = [k for k in ("worker_id", *_FIELDS[JournalOperation(op)]) if k not in record]
    return f"op_code {op} without {', '.join(missing)}" if missing else ""

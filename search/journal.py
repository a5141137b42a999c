"""A damaged journal file is repaired or refused on start, never read past.

Optuna's journal reader skips a final line without a newline (a write cut
off by a kill) but the next append would glue a new record onto it and
corrupt the file for good; a lock left by a killed process stalls every
writer for Optuna's 30 s grace period. Both are handled before the study
opens, with a copy of the original kept.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from optuna.storages.journal import JournalFileSymlinkLock

from search.errors import BadInput

STALE_LOCK_AGE_S = 10.0  # a journal append holds the lock for milliseconds


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
        try:
            json.loads(line)
        except ValueError:
            raise BadInput(f"the study journal must hold one JSON record per line; {path} line {number} is not one; "
                           f"fix: restore the file from a backup or move it away to start a new study") from None
    if partial:
        backup = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(path, backup)
        with open(path, "r+b") as f:
            f.truncate(len(complete) + 1)
        notes.append(f"the study journal ended in a partial record ({len(partial)} bytes, a write cut off by a kill): "
                     f"removed it, kept every complete record, original copied to {backup}")
    return notes

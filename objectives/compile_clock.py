"""How long torch.compile has compiled in this process so far, told to the sweep while the trial runs.

Compilation is not training: `max-autotune` can compile for many minutes on
a GPU, and that must not count against the trial's `trial.timeout_s`. The
sweep gives compile time its own budget (`trial.compile_timeout_s`,
search/trial/isolate.py), so it must know how long a running trial has compiled.
torch.compile runs its registered callbacks at the start and end of every
compilation (torch._dynamo.callback: a Dynamo frame compile, AOTAutograd's
lazy backward compile, CUDA graph recording); this module keeps the total
and writes it, with the start of a compilation still running, to one small
JSON file per process (each DDP rank compiles its own graphs) in the
directory named by SEARCH_COMPILE_CLOCK_DIR, replaced atomically. Without
that variable (a trial run outside the sweep) nothing is recorded.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

ENV = "SEARCH_COMPILE_CLOCK_DIR"
_clock: dict[str, Any] = {"registered": False, "total_s": 0.0, "since_unix_s": None}


def start_compile_clock() -> None:
    """Register the callbacks once per process, when the sweep asked for a clock."""
    if not os.environ.get(ENV) or _clock["registered"]:
        return
    from torch._dynamo.callback import on_compile_end, on_compile_start

    on_compile_start(_started)
    on_compile_end(_ended)
    _clock["registered"] = True


def _started(_: Any) -> None:
    _clock["since_unix_s"] = time.time()
    _write()


def _ended(_: Any) -> None:
    if _clock["since_unix_s"] is not None:
        _clock["total_s"] += time.time() - _clock["since_unix_s"]
    _clock["since_unix_s"] = None
    _write()


def _write() -> None:
    directory = os.environ.get(ENV)
    if not directory:
        return
    path = Path(directory) / f"{os.getpid()}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"total_s": _clock["total_s"], "since_unix_s": _clock["since_unix_s"]}))
    os.replace(tmp, path)


def compiled_s(directory: str | Path, now_unix_s: float) -> float:
    """Seconds the trial has compiled so far, a compilation still running included: the
    most of any one process, since ranks compile at the same time."""
    most = 0.0
    for path in Path(directory).glob("*.json"):
        try:
            clock = json.loads(path.read_text())
        except (OSError, ValueError):  # replaced while read: the next look sees it
            continue
        running = now_unix_s - clock["since_unix_s"] if clock.get("since_unix_s") is not None else 0.0
        most = max(most, float(clock.get("total_s", 0.0)) + max(0.0, running))
    return most

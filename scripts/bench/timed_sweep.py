"""A real sweep (`python -m search multirun ...`) with every call into
search.tracking.mlflow_runs and mlflow_client timed: the MLflow cost of a sweep, measured where it is paid.

The wrapper replaces each timed public function of those two modules with a timer
around the same function before the sweep starts (the sweep calls them as
`<module>.<name>`), so the sweep runs unchanged. The timings, the sweep's
wall time and every trial's figures (read back from the Optuna journal) come
back as one dict.

    python scripts/bench/timed_sweep.py OUT.json multirun [overrides]   # what run_timed_sweep starts
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIMED = ["configure_client", "check_reachable", "start_sweep", "start_trial", "end_trial", "end_sweep",
         "close_stale_runs", "how_to_look"]
PER_TRIAL = ("start_trial", "end_trial")


def run_timed_sweep(args: list[str], workdir: Path, timeout_s: float = 1800, time_calls: bool = True,
                    repo: Path = REPO) -> dict:
    """Run the sweep in `workdir` (its own journal and MLflow database); return
    wall_s (process start to exit, measured outside), the tracking timings and
    each completed trial's metrics with its start/end wall clock.

    time_calls=False runs `python -m search` itself, as a user starts it, and times no call: the
    wrapper imports MLflow and the tracking modules before the sweep starts, and exits through
    `main` rather than the module's own exit, both of which a wall-time comparison must not count.
    `repo`: the checkout whose code runs (another one: the commit before a change)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    out = workdir / "tracking-timings.json"
    env = {**os.environ, "PYTHONPATH": str(repo), "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db"}
    started_unix, started = time.time(), time.perf_counter()
    command = [sys.executable, __file__, str(out), *args] if time_calls else [sys.executable, "-m", "search", *args]
    proc = subprocess.run(command, cwd=workdir, env=env, text=True, capture_output=True, timeout=timeout_s)
    wall_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"the sweep exited {proc.returncode}: {(proc.stderr or proc.stdout)[-2000:]}")
    storage = JournalStorage(JournalFileBackend(str(workdir / "optuna.journal")))
    trials = []
    for summary in storage.get_all_studies():
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        trials += [{"metrics": t.user_attrs.get("metrics", {}), "outcome": t.user_attrs.get("outcome"),
                    "start_unix_s": t.datetime_start.timestamp(), "end_unix_s": t.datetime_complete.timestamp()}
                   for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    return {"wall_s": wall_s, "started_unix_s": started_unix, "trials": trials, "stdout": proc.stdout,
            **(json.loads(out.read_text()) if time_calls else {})}


def _timed(name: str, fn, calls: list) -> object:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            calls.append([name, time.perf_counter() - t0])
    return wrapper


def main(out: str, argv: list[str]) -> None:
    t0 = time.perf_counter()
    import mlflow  # noqa: F401 - the import is part of what tracking costs

    timings = {"import_mlflow_s": time.perf_counter() - t0, "calls": []}
    from search.tracking import mlflow_client, mlflow_runs

    for name in TIMED:
        module = mlflow_runs if hasattr(mlflow_runs, name) else mlflow_client
        setattr(module, name, _timed(name, getattr(module, name), timings["calls"]))
    atexit.register(lambda: Path(out).write_text(json.dumps(timings)))
    from search.__main__ import main as search_main

    search_main(argv)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

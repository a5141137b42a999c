"""One trial = one fresh child process.

The child is forked from a forkserver that has torch and objectives
preloaded, so a trial starts in milliseconds yet shares no memory, threads
or CUDA context with the sweep or with earlier trials. The result comes back
as a JSON file written atomically; a child that dies without one, or runs
past its timeout, becomes an outcome instead of an exception.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from search import trial_child
from search.gpu_telemetry import GpuSampler, trial_gpu_indices
from search.mfu import trial_mfu
from search.telemetry import TreeSampler, kill_tree

_PRELOAD = ["torch", "objectives", "search.trial_child"]
_context: Any = None


def _forkserver() -> Any:
    global _context
    if _context is None:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        _context = ctx
    return _context


def run_isolated(cfg: dict, timeout_s: float, report: Any = None) -> dict[str, Any]:
    """Run `objectives.run_trial(cfg, report)` in a child; return the result dict with
    `outcome` one of ok | stopped_early | diverged | infeasible | oom | crashed | timeout."""
    with tempfile.TemporaryDirectory(prefix="search-trial-") as tmp:
        result_path = Path(tmp) / "result.json"
        started = time.perf_counter()
        proc = _forkserver().Process(target=trial_child.main, args=(cfg, str(result_path), os.getpid(), report),
                                     name="search-trial")
        proc.start()
        gpus = trial_gpu_indices(int((cfg.get("parallel") or {}).get("devices", 1)))
        try:
            with TreeSampler(proc.pid) as sampler, GpuSampler(gpus) as gpu:
                proc.join(timeout_s)
                timed_out = proc.is_alive()
        finally:
            if proc.is_alive():
                kill_tree(proc.pid)
                proc.join()
        wall_s = time.perf_counter() - started
        if timed_out:
            result = {"outcome": "timeout", "reason": f"ran past trial.timeout_s={timeout_s:g}"}
        elif result_path.exists():
            result = json.loads(result_path.read_text())
        else:
            result = {"outcome": "crashed", "reason": _exit_reason(proc.exitcode)}
    result.setdefault("metrics", {})
    result.setdefault("info", {})
    result.setdefault("reason", "")
    metrics = result["metrics"]
    metrics.update(sampler.metrics())
    metrics["trial_wall_s"] = wall_s
    gpu_report = gpu.report(metrics)
    metrics.update(gpu_report.metrics)
    result["info"].update(gpu_report.info)
    result["series"] = gpu_report.series
    value = trial_mfu(metrics, gpu.device_name, str(cfg.get("precision")), len(gpus))
    if value is not None:
        metrics["mfu"] = value
    return result


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (the kernel's OOM killer sends this too)" if name == "SIGKILL" else ""
        return f"trial process killed by {name}{hint}"
    return f"trial process exited with status {exitcode} without a result"

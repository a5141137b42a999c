"""One trial = one fresh child process.

The child is forked from a forkserver that has torch and objectives
preloaded, so a trial starts in milliseconds yet shares no memory, threads
or CUDA context with the sweep or with earlier trials. The result comes back
as a JSON file written atomically; a child that dies without one, or runs
past its timeout, becomes an outcome instead of an exception.

`start_isolated` returns as soon as the child runs, so that the sweeper's
device slots (search/trial/slots.py) can run several trials at once;
`run_isolated` starts one and waits for it.
"""
from __future__ import annotations

import atexit
import json
import multiprocessing as mp
import multiprocessing.forkserver
import os
import signal
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from search.trial import child as trial_child
from search.measure.gpu_telemetry import GpuSampler, trial_gpu_indices
from search.measure.mfu import trial_mfu
from search.measure.cpu_telemetry import TreeSampler
from search.trial.process_tree import kill_tree
from search.trial.typed_config import parse_trial

_PRELOAD = ["torch", "objectives.run", "search.trial.child", "psutil"]  # objectives alone leaves out run_trial (torch)
_PRELOAD_LAST = "objectives.forkserver_exit"  # the forkserver's quick exit: its exit handler must be registered last
DEFAULT_COMPILE_TIMEOUT_S = 1800.0  # trial.compile_timeout_s when a config has none
_context: Any = None


def _forkserver() -> Any:
    """The process every trial is forked from; it and so every trial inherit this
    process's environment when it starts, CUDA_DEVICE_ORDER included (search/measure/nvml.py:
    the sweep's CLI pins it first, and refuses another order; any other caller gets it here)."""
    global _context
    if _context is None:
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_preload())
        atexit.register(_stop_forkserver)
        _context = ctx
    return _context


_exiting = False


def _stop_forkserver() -> None:
    """At this process's exit, end its forkserver at once instead of when it notices. It shares this
    process's stdout and stderr, so a pipe reading them (`| tee`, CI, cron) stays open until it ends, and
    one started early (search/__main__.py) for a sweep that then refused its config is still importing
    torch: a pipe reading that error closed 0.2-0.8 s after the command had exited (3 runs), and now closes
    with it. By the time this runs, the trials it forked have ended (the sweeper waits for them)."""
    global _exiting
    _exiting = True
    pid = getattr(mp.forkserver._forkserver, "_forkserver_pid", None)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _preload() -> list[str]:
    """What the forkserver imports, and under a process pool with a start method of its own (joblib's loky:
    Hydra's joblib launcher runs the sweep's jobs in its workers) the module that defines that method: each
    child is told its parent's start method, and exits with "cannot find context for 'loky'" unless it is
    registered in the forkserver it is forked from."""
    method = mp.get_start_method(allow_none=True)
    own = [] if method in (None, "fork", "spawn", "forkserver") else [type(mp.get_context(method)).__module__]
    return [*_PRELOAD, *own, _PRELOAD_LAST]


_warming: threading.Thread | None = None


def warm_up() -> threading.Thread:
    """Start the forkserver (it imports torch: seconds) in the background while
    the sweep sets itself up; join the thread before the first trial starts, so
    that with device slots the first slot does not hold up the others while torch
    is imported. Started once: the app's Hydra callback starts it as soon as a
    multirun's config is composed (search/trial/app.py WarmUp), the sweeper calls
    this again and gets the same thread."""
    global _warming
    if _warming is not None:
        return _warming

    def boot() -> None:
        try:
            proc = _forkserver().Process(target=time.sleep, args=(0,), name="search-warm-up")
            proc.start()
            proc.join()
        except Exception:
            if not _exiting:  # the process exits under it: its forkserver was stopped (_stop_forkserver)
                raise

    _warming = threading.Thread(target=boot, name="search-forkserver-warm-up", daemon=True)
    _warming.start()
    return _warming


@dataclass
class RunningTrial:
    """A trial's child process, its samplers and its deadline.

    The deadline is `timeout_s` of everything but compilation, plus the time
    the trial has spent in torch.compile so far up to `compile_timeout_s`
    (objectives/compile_clock.py): max-autotune may compile for minutes, and
    that says nothing about how fast the configuration trains. Compile time
    past its budget counts against `timeout_s` like any other."""

    cfg: dict
    proc: Any
    timeout_s: float
    started: float
    result_path: Path
    sampler: TreeSampler
    gpu: GpuSampler
    gpus: list[int]
    compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S
    compile_clock_dir: Path | None = None
    precision: str | None = None  # the trial's (objectives.TrialConfig.precision); None: its config was refused
    _cleanup: ExitStack = field(default_factory=ExitStack)

    @property
    def sentinel(self) -> int:
        return self.proc.sentinel

    def compile_credit_s(self) -> float:
        """Compile time so far that does not count against `timeout_s`."""
        if self.compile_clock_dir is None:
            return 0.0
        from objectives.compile_clock import compiled_s  # objectives (and torch) stay out of the sweep's start-up

        return min(self.compile_timeout_s, compiled_s(self.compile_clock_dir, time.time()))

    def seconds_left(self) -> float:
        return max(0.0, self.started + self.timeout_s + self.compile_credit_s() - time.perf_counter())

    def done(self) -> bool:
        return not self.proc.is_alive() or self.seconds_left() == 0.0

    def kill(self) -> None:
        """Stop the samplers, kill the child's process tree, remove its files."""
        self._cleanup.close()

    def wait(self) -> dict[str, Any]:
        """Block until the child ends or its deadline passes; the result dict with
        `outcome` one of ok | stopped_early | diverged | infeasible | oom | crashed | timeout."""
        try:
            while self.proc.is_alive() and (left := self.seconds_left()) > 0:
                self.proc.join(left)  # compiling meanwhile moves the deadline: look again
            timed_out = self.proc.is_alive()
            credit_s = self.compile_credit_s() if timed_out else 0.0
            if timed_out:
                _end(self.proc)
            wall_s = time.perf_counter() - self.started
            if timed_out:
                result = {"outcome": "timeout", "reason": f"ran past trial.timeout_s={self.timeout_s:g}"
                          + (f" plus {credit_s:.0f} s of torch.compile (up to trial.compile_timeout_s="
                             f"{self.compile_timeout_s:g} s is not counted)" if credit_s else "")}
            elif self.result_path.exists():
                result = json.loads(self.result_path.read_text())
            else:
                result = {"outcome": "crashed", "reason": _exit_reason(self.proc.exitcode)}
        finally:
            self.kill()
        return _with_telemetry(result, self, wall_s)


def start_isolated(cfg: dict, timeout_s: float, report: Any = None, visible_devices: str | None = None,
                   parsed: Any = None) -> RunningTrial:
    """Start `objectives.run_trial(cfg, report)` in a child that sees only `visible_devices`
    (CUDA_VISIBLE_DEVICES; None: the sweep's own) and return without waiting. `parsed` is
    `cfg` as objectives.TrialConfig when the sweep parsed it already (else it is parsed here,
    once: search/trial/typed_config.py); the child runs it as it is."""
    if parsed is None:
        parsed = parse_trial(cfg)
    cleanup = ExitStack()
    try:
        tmp = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="search-trial-"))
        result_path = Path(tmp) / "result.json"
        compile_clock_dir = Path(tmp) / "compile-clock"
        compile_clock_dir.mkdir()
        started = time.perf_counter()
        proc = _forkserver().Process(target=trial_child.main,
                                     args=(cfg, str(result_path), os.getpid(), report, visible_devices,
                                           str(compile_clock_dir), parsed),
                                     name="search-trial")
        proc.start()
        cleanup.callback(_end, proc)
        # A config the parser refused ends in its child at once (infeasible): one device, nothing to sample.
        gpus = trial_gpu_indices(parsed.parallel.devices if parsed is not None else 1, visible_devices)
        sampler = cleanup.enter_context(TreeSampler(proc.pid))
        gpu = cleanup.enter_context(GpuSampler(gpus))
    except BaseException:
        cleanup.close()
        raise
    compile_timeout_s = (cfg.get("trial") or {}).get("compile_timeout_s", DEFAULT_COMPILE_TIMEOUT_S)
    return RunningTrial(cfg, proc, timeout_s, started, result_path, sampler, gpu, gpus, float(compile_timeout_s),
                        compile_clock_dir, None if parsed is None else parsed.precision, cleanup)


def run_isolated(cfg: dict, timeout_s: float, report: Any = None, visible_devices: str | None = None,
                 parsed: Any = None) -> dict[str, Any]:
    """Run `objectives.run_trial(cfg, report)` in a child and wait for its result."""
    return start_isolated(cfg, timeout_s, report, visible_devices, parsed).wait()


def _with_telemetry(result: dict[str, Any], trial: RunningTrial, wall_s: float) -> dict[str, Any]:
    result.setdefault("metrics", {})
    result.setdefault("info", {})
    result.setdefault("reason", "")
    metrics = result["metrics"]
    metrics.update(trial.sampler.metrics())
    metrics["trial_wall_s"] = wall_s
    gpu_report = trial.gpu.report(metrics, result.get("timed_windows_unix_s"))
    metrics.update(gpu_report.metrics)
    result["info"].update(gpu_report.info)
    result["series"] = gpu_report.series
    value = trial_mfu(metrics, trial.gpu.device_name, str(trial.precision), len(trial.gpus))
    if value is not None:
        metrics["mfu"] = value
    return result


def _end(proc: Any) -> None:
    if proc.is_alive():
        kill_tree(proc.pid)
    proc.join()


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (the kernel's OOM killer sends this too)" if name == "SIGKILL" else ""
        return f"trial process killed by {name}{hint}"
    return f"trial process exited with status {exitcode} without a result"

"""What runs inside a trial's child process. Imports only the standard
library at module level so that unpickling it in the forkserver child is
free; torch and objectives are already loaded there."""
from __future__ import annotations

import json
import os
import resource
import threading
import time
import traceback

_OOM_WORDS = ("OutOfMemory", "out of memory", "can't allocate memory", "Cannot allocate memory")


def die_with_sweep(sweep_pid: int, interval_s: float = 0.5) -> None:
    """Kill this trial's whole process tree when the sweep that started it is
    gone (SIGKILL leaves it no chance to clean up). The parent here is the
    forkserver, which outlives the sweep while any of its children hold its
    liveness pipe, so PR_SET_PDEATHSIG cannot be used; a watchdog thread can."""
    import psutil

    sweep = psutil.Process(sweep_pid)

    def watch() -> None:
        while sweep.is_running():
            time.sleep(interval_s)
        for child in psutil.Process().children(recursive=True):
            try:
                child.kill()
            except psutil.Error:
                pass
        os._exit(1)

    threading.Thread(target=watch, name="search-sweep-watchdog", daemon=True).start()


def cap_memory(max_bytes: int | None) -> None:
    """Make out-of-memory real on a CPU: allocations past the cap fail in this process tree."""
    if max_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))


def outcome_of(err: BaseException) -> str:
    text = f"{type(err).__name__} {err}"
    return "oom" if isinstance(err, MemoryError) or any(w in text for w in _OOM_WORDS) else "crashed"


def main(cfg: dict, result_path: str, sweep_pid: int, report: object = None,
         visible_devices: str | None = None, compile_clock_dir: str | None = None, parsed: object = None) -> None:
    """`parsed`: `cfg` as objectives.TrialConfig, parsed by the sweep (None: the sweep's parser
    refused it, and run_trial parses it again to end infeasible with the reason);
    `report`: a search.trial.learning_curve.TrialReporter when an Optuna pruner watches this trial;
    `visible_devices`: the GPUs of this trial's device slots (CUDA_VISIBLE_DEVICES);
    `compile_clock_dir`: where torch.compile's time so far is written for the sweep
    (objectives/compile_clock.py; DDP ranks inherit the variable)."""
    # Before anything touches CUDA: the slots' ordinals are NVML's, which count GPUs in PCI bus order
    # (search/measure/nvml.py). Set here, not only inherited: a forkserver started by another caller lacks it.
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if visible_devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices
    if compile_clock_dir is not None:
        from objectives.compile_clock import ENV

        os.environ[ENV] = compile_clock_dir
    die_with_sweep(sweep_pid)
    cap_memory((cfg.get("trial") or {}).get("max_memory_bytes"))
    import objectives

    try:
        # warn=False: which knobs do not apply is said by the sweep once, or by `search run` after its table
        result = objectives.run_trial(cfg, report, parsed=parsed, warn=False).to_dict()  # type: ignore[arg-type]
    except objectives.ConfigError as err:
        result = {"outcome": "infeasible", "reason": str(err), "metrics": {}, "info": {}}
    except BaseException as err:  # noqa: BLE001 - every failure becomes data
        last = traceback.extract_tb(err.__traceback__)[-1:]
        where = f" at {os.path.basename(last[0].filename)}:{last[0].lineno}" if last else ""
        first_line = (str(err).strip().splitlines() or [""])[0][:300]
        result = {"outcome": outcome_of(err), "reason": f"{type(err).__name__}: {first_line}{where}",
                  "metrics": {}, "info": {}}
    tmp = result_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, result_path)

"""`python -m search doctor`: what this machine can run, and whether the
study storage and the MLflow tracking server answer, before a sweep starts.

The same facts prune the search space: `runnable_knob_values()` and
`removed_values()` are what the sweeper drops before the first trial, so a
value the hardware cannot run (fp8 on a CPU, tf32 without Ampere) is
reported once instead of failing as a trial. GPU facts come from NVML, not
torch.cuda, so asking them leaves the sweep process fork-safe for CUDA.

Exit status 0 when everything a sweep needs is present, 1 when something
needed is missing (torch, a reachable storage, a reachable tracking server).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from search.measure import fingerprint
from search.measure import nvml
from search.tracking.redact import redact

DEFAULT_STORAGE = "optuna.journal"  # the same default as search/sweep/study.py
CHECK_TIMEOUT_S = 20.0
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
SEMI_STRUCTURED = "model_pruning.method='2:4'"  # as search.sweep.space.to_override writes it (the colon needs quotes)


@dataclass
class Gpus:
    """The GPUs a trial could use: their count and the lowest compute capability among them."""

    count: int
    capability: tuple[int, int] | None
    why_none: str  # "" when count > 0


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    needed: bool = True


def gpus() -> Gpus:
    torch_cuda = _torch_cuda_version()
    reason = nvml.start()
    if reason is not None:
        return Gpus(0, None, f"NVML: {reason}")
    try:
        indices = nvml.visible_indices(nvml.device_count())
        caps = [nvml.compute_capability(nvml.handle(i)) for i in indices]
    except Exception as err:
        return Gpus(0, None, f"NVML: {type(err).__name__}: {err}")
    finally:
        nvml.stop()
    if not caps:
        return Gpus(0, None, "CUDA_VISIBLE_DEVICES hides every GPU")
    if torch_cuda is None:
        return Gpus(0, None, f"{len(caps)} GPU(s) present but torch is a CPU-only build")
    return Gpus(len(caps), min(caps), "")


def runnable_knob_values() -> dict[str, list]:
    """Values of the hardware-bound knobs that this machine can run."""
    g = gpus()
    removed = _removed_precisions(g)
    max_devices = g.count if g.count else _cpu_cores()
    return {"precision": [p for p in PRECISIONS if p not in removed],
            "parallel.devices": list(range(1, max_devices + 1))}


def removed_values() -> dict[str, str]:
    """'knob=value' -> why this machine cannot run it, for values the space may name."""
    g = gpus()
    removed = {f"precision={p}": why for p, why in _removed_precisions(g).items()}
    return {**removed, **_removed_gpu_switches(g)}


def _removed_gpu_switches(g: Gpus) -> dict[str, str]:
    """Knob values that exist only with CUDA (or a newer GPU) besides the precisions."""
    out = {}
    if g.count == 0:
        for line, what in (("framework.cudnn_benchmark=true", "cuDNN"),
                           ("memory.expandable_segments=true", "the CUDA caching allocator")):
            out[line] = f"needs a CUDA GPU ({what}); no usable GPU ({g.why_none})"
        out[SEMI_STRUCTURED] = f"needs a GPU with compute capability >= 8.0; no usable GPU ({g.why_none})"
    elif (g.capability or (0, 0)) < (8, 0):
        out[SEMI_STRUCTURED] = "needs compute capability >= 8.0 (sparse tensor cores)"
    elif not _has_cusparselt():
        out[SEMI_STRUCTURED] = "needs cuSPARSELt, which this torch build lacks; fix: install a CUDA build of torch"
    elif not _importable("torchao.sparsity.training"):
        out[SEMI_STRUCTURED] = "needs torchao; fix: pip install 'torchao>=0.18'"
    return out


def _removed_precisions(g: Gpus) -> dict[str, str]:
    if g.count == 0:
        return {"tf32": f"needs a GPU with compute capability >= 8.0 (Ampere); no usable GPU ({g.why_none})",
                "fp16": f"needs a CUDA GPU; no usable GPU ({g.why_none})",
                "fp8": f"needs a GPU with compute capability >= 8.9 and torchao; no usable GPU ({g.why_none})"}
    cap = g.capability or (0, 0)
    shown = f"{cap[0]}.{cap[1]}"
    out = {}
    if cap < (8, 0):
        out["tf32"] = f"needs compute capability >= 8.0 (Ampere); this GPU has {shown}"
        out["bf16"] = f"needs compute capability >= 8.0 for bf16 tensor cores; this GPU has {shown}"
    if cap < (8, 9):
        out["fp8"] = f"needs compute capability >= 8.9 (Ada/Hopper); this GPU has {shown}"
    elif not _importable("torchao.float8"):
        out["fp8"] = "needs torchao; fix: pip install 'torchao>=0.18'"
    return out


def ddp_backends() -> list[str]:
    import torch.distributed as dist

    if not dist.is_available():
        return []
    return [name for name, probe in (("gloo", dist.is_gloo_available), ("nccl", dist.is_nccl_available)) if probe()]


def check_storage(storage: str | None) -> Check:
    """A journal file's directory must be writable; a URL must open as Optuna RDB storage."""
    target = storage or DEFAULT_STORAGE
    if "://" not in target:
        path = Path(target).resolve()
        ok = path.parent.is_dir() and os.access(path.parent, os.W_OK)
        detail = f"journal {path}" + ("" if ok else f" (directory {path.parent} missing or not writable)")
        return Check("study storage", ok, detail)

    from search.sweep.preflight import check_database_url  # a connection, no tables; refuses a URL SQLAlchemy misreads

    return _probe("study storage", redact(target), lambda: check_database_url(target))


def check_tracking() -> Check:
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = mlflow.get_tracking_uri()  # honours MLFLOW_TRACKING_URI
    http = uri.startswith(("http://", "https://"))
    short = _env(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="5") if http else contextlib.nullcontext()
    with short:
        return _probe("MLflow tracking", redact(uri), lambda: MlflowClient(uri).search_experiments(max_results=1))


def checks(storage: str | None) -> list[Check]:
    out = []
    torch_version = _torch_version()
    out.append(Check("torch", torch_version is not None, torch_version or "not importable; fix: pip install torch"))
    if torch_version is not None:
        backends = ddp_backends()
        out.append(Check("DDP backends", bool(backends), ", ".join(backends) or "none", needed=False))
    out.append(Check("torchao (fp8, 2:4)", _importable("torchao"), _torchao_version() or
                     "not installed; fix: pip install 'torchao>=0.18'", needed=False))
    out.append(check_storage(storage))
    out.append(check_tracking())
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m search doctor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", default=None,
                        help=f"Optuna storage: a journal file path (default ./{DEFAULT_STORAGE}) or an SQLAlchemy URL")
    args = parser.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    facts = fingerprint.collect()
    hardware = Table(title="hardware and versions", show_header=False, title_justify="left")
    for key, value in facts.items():
        hardware.add_row(key, value)
    console.print(hardware)

    knobs = Table(title="knob values this machine can run", title_justify="left")
    knobs.add_column("knob")
    knobs.add_column("runnable")
    knobs.add_column("removed from the space")
    runnable, removed = runnable_knob_values(), removed_values()
    for knob in dict.fromkeys([*runnable, *(k.split("=", 1)[0] for k in removed)]):
        gone = "; ".join(f"{k.split('=', 1)[1]}: {why}" for k, why in removed.items() if k.startswith(knob + "="))
        knobs.add_row(knob, ", ".join(map(str, runnable.get(knob, ["every other value"]))), gone or "-")
    console.print(knobs)
    from objectives.config import COMBINATION_RULES

    console.print(f"rules on any machine: {'; '.join(COMBINATION_RULES)}")
    console.print("to run each runnable value for a few steps and catch a check that admits too much: "
                  "python -m search selftest")

    results = checks(args.storage)
    table = Table(title="services and libraries", title_justify="left")
    for column in ("check", "status", "detail"):
        table.add_column(column)
    for c in results:
        status = "ok" if c.ok else ("missing" if c.needed else "missing (optional)")
        table.add_row(c.name, status, redact(c.detail))
    console.print(table)
    missing = [c.name for c in results if c.needed and not c.ok]
    if missing:
        console.print(f"doctor: missing what a sweep needs: {', '.join(missing)}")
        return 1
    console.print("doctor: everything a sweep needs is present")
    return 0


def _probe(name: str, shown: str, call: Callable[[], Any]) -> Check:
    """Run `call` in a thread so an unanswering host costs CHECK_TIMEOUT_S, not a TCP timeout."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - any failure means "not reachable"
            outcome.append(err)

    thread = threading.Thread(target=target, name=f"doctor-{name}", daemon=True)
    thread.start()
    thread.join(CHECK_TIMEOUT_S)
    if not outcome:
        return Check(name, False, f"{shown} (no answer within {CHECK_TIMEOUT_S:g} s)")
    err = outcome[0]
    if err is None:
        return Check(name, True, shown)
    reason = " ".join(str(err).split())[:160]
    return Check(name, False, f"{shown} ({type(err).__name__}: {redact(reason)})")


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update({k: v for k, v in values.items() if saved[k] is None})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)


def _cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)


def _torch_cuda_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda


def _has_cusparselt() -> bool:
    """Whether this torch build has cuSPARSELt (2:4's kernels); a build flag, so CUDA is not started."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.backends.cusparselt.is_available())


def _torchao_version() -> str | None:
    """The installed torchao's version, read from its metadata: importing it takes seconds."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torchao")
    except PackageNotFoundError:
        return None


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))

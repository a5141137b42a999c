"""`python -m search doctor`: what this machine can run, and whether the
study storage and the MLflow tracking server answer, before a sweep starts.

The knob values it lists are the ones the sweeper keeps in the search space
(search/measure/machine.py), so a value the hardware cannot run (fp8 on a
CPU, tf32 without Ampere) is reported once instead of failing as a trial.

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
from search.measure.machine import (Gpus, _importable, gpus, machine_hardware,  # noqa: F401 - doctor's own names
                                    removed_values, runnable_knob_values)
from search.sweep.study import DEFAULT_STORAGE
from search.tracking.mlflow_client import missing_local_store
from search.tracking.redact import redact

CHECK_TIMEOUT_S = 20.0


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    needed: bool = True


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
    if missing_local_store() is not None:  # a check creates nothing
        path = Path(uri[len("sqlite:///"):]).resolve()
        ok = path.parent.is_dir() and os.access(path.parent, os.W_OK)
        return Check("MLflow tracking", ok, f"{redact(uri)}: made by the first sweep" if ok else
                     f"{redact(uri)}: directory {path.parent} missing or not writable; fix: MLFLOW_TRACKING_URI")
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

    from search.sweep.space import to_override

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
    hw = machine_hardware()
    runnable, removed = runnable_knob_values(hw), removed_values(hw)
    for knob in dict.fromkeys([*runnable, *(k.split("=", 1)[0] for k in removed)]):
        gone = "; ".join(f"{k.split('=', 1)[1]}: {why}" for k, why in removed.items() if k.startswith(knob + "="))
        shown = [to_override("", v)[1:] for v in runnable[knob]] if knob in runnable else ["every other value"]
        knobs.add_row(knob, ", ".join(shown), gone or "-")
    console.print(knobs)
    from objectives.config import COMBINATION_RULES

    console.print(f"rules on any machine: {'; '.join(COMBINATION_RULES)}")
    console.print("to run each runnable value for a few steps and catch a check that admits too much: "
                  "python -m search selftest")
    from search.commands.gpu_default import what_multirun_runs

    console.print(what_multirun_runs())  # on a GPU, the GPU default (objective=gpt search=gpu)

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


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)


def _torchao_version() -> str | None:
    """The installed torchao's version, read from its metadata: importing it takes seconds."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torchao")
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))

"""Start one process per DDP rank, return rank 0's answer, and never hang on a failed rank.

Start method, measured on a 2-core CPU box (two ranks, torch preloaded):
``fork`` starts both ranks in ~0.05 s, ``forkserver`` in ~1.0 s, ``spawn`` in
~1.7 s. But a forked child that runs OpenMP with more than one thread hangs
if its parent already ran a multi-threaded OpenMP region (GNU libgomp is not
fork-safe), and CUDA cannot be used in a child forked after the parent has
touched the driver (``torch.cuda.is_available()`` already does). So ``fork``
is used only for CPU ranks of one thread each, and the slower but always-safe
``forkserver`` otherwise.

Rendezvous: this process holds a TCPStore server on a port the kernel picks
(port 0) for as long as the ranks run, and hands the ranks its port once
they have started; every rank joins as a client (objectives/knobs/parallel.py).
Picking a free port by binding and closing a socket, for rank 0 to bind
again later, lets the trials of several GPU slots starting at once draw the
same port, and the loser's rank 0 fails with "address already in use".
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import traceback
from datetime import timedelta
from multiprocessing.connection import wait
from typing import Any, Callable, Mapping

import torch
import torch.distributed as dist

RANK_TIMEOUT_S = 900.0  # a caller that names no limit (checks of a few steps, tests)
LIMIT_MARGIN_S = 60.0  # past the trial's own deadline, so that deadline (outcome timeout) fires first


class RankFailed(RuntimeError):
    """A rank raised or died; the others were stopped."""


def rendezvous_store(timeout_s: float = RANK_TIMEOUT_S) -> dist.TCPStore:
    """A TCPStore server bound to a port the kernel picks; it stays bound while the object lives."""
    return dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=timeout_s), wait_for_workers=False)


def trial_limit_s(cfg: Mapping[str, Any]) -> float:
    """How long a rank may wait on a peer, and the launcher on its ranks, in a trial of this config:
    ``trial.timeout_s`` plus ``trial.compile_timeout_s`` (the latest the isolated trial's deadline can
    fall, search/trial/isolate.py) plus a margin. A fixed shorter limit ended a DDP trial that was
    legitimately still training, compiling or evaluating (budgets of 1,800 s and more on a GPU) as
    ``crashed``; a rank that dies still stops the others at once (``run_ranks``)."""
    section = cfg.get("trial") or {}
    return float(section.get("timeout_s") or 600) + float(section.get("compile_timeout_s") or 1800) + LIMIT_MARGIN_S


def start_method(threads_per_rank: int) -> str:
    return "fork" if threads_per_rank == 1 and not torch.cuda.is_available() else "forkserver"


def _rank_entry(fn: Callable[..., Any], rank: int, world_size: int, conn: Any, args: tuple) -> None:
    """Wait for the rendezvous port, run, report, then leave with ``os._exit``: nothing
    in a rank needs cleaning up, and tearing gloo down can hang in
    ProcessGroupGloo's destructor once DDP's reducer lets go of it, so the
    process group is never destroyed."""
    code = 0
    try:
        port = conn.recv()
        conn.send(("ok", fn(rank, world_size, port, *args)))
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        code = 1
        conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    conn.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_ranks(fn: Callable[..., Any], world_size: int, threads_per_rank: int, args: tuple = (),
              timeout_s: float = RANK_TIMEOUT_S) -> Any:
    """Run ``fn(rank, world_size, port, *args)`` in ``world_size`` processes; return rank 0's value.
    ``port`` is the rendezvous TCPStore's, held by this process (``init_process_group``); ``timeout_s``
    how long to wait for the ranks (a trial's: ``trial_limit_s``).

    ``fn`` must be a module-level function (forkserver pickles it). The first
    rank to raise or die stops all the others at once, and its error is
    re-raised here: a collective waiting on a dead peer would otherwise
    block until gloo's timeout. Ranks are not daemons, because a daemon may
    not start DataLoader workers; they are stopped here on every exit path.
    """
    method = start_method(threads_per_rank)
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["torch", "objectives", "objectives.forkserver_exit"])  # its quick exit last
    procs, conns = [], {}
    try:
        for rank in range(world_size):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_rank_entry, args=(fn, rank, world_size, theirs, args))
            proc.start()
            theirs.close()
            procs.append(proc)
            conns[mine] = rank
        store = rendezvous_store(timeout_s)  # after the forks: a forked rank must not inherit its server thread
        for conn in conns:
            conn.send(store.port)
        return _collect(procs, conns, timeout_s)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _collect(procs: list, conns: dict, timeout_s: float) -> Any:
    results: dict[int, Any] = {}
    sentinels = {proc.sentinel: rank for rank, proc in enumerate(procs)}
    pending = dict(conns)
    while pending:
        ready = wait(list(pending) + list(sentinels), timeout=timeout_s)
        if not ready:
            raise RankFailed(f"no rank finished within {timeout_s:.0f} s")
        for obj in ready:
            if obj in pending:
                rank = pending.pop(obj)
                try:
                    message = obj.recv()
                except EOFError:
                    message = ("error", f"rank {rank} exited without a result", "")
                if message[0] == "error":
                    raise RankFailed(f"rank {rank} failed: {message[1]}\n{message[2]}")
                results[rank] = message[1]
            elif obj in sentinels:
                rank = sentinels.pop(obj)
                code = procs[rank].exitcode
                if code != 0 and any(r == rank for r in pending.values()):
                    # Drain a final message if the rank managed to send one.
                    conn = next(c for c, r in pending.items() if r == rank)
                    if conn.poll():
                        continue
                    raise RankFailed(f"rank {rank} died with exit code {code} before reporting")
    return results[0]

"""Start one process per DDP rank, return rank 0's answer, and never hang on a failed rank.

Start method, measured on a 2-core CPU box (two ranks, torch preloaded):
``fork`` starts both ranks in ~0.05 s, ``forkserver`` in ~1.0 s, ``spawn`` in
~1.7 s. But a forked child that runs OpenMP with more than one thread hangs
if its parent already ran a multi-threaded OpenMP region (GNU libgomp is not
fork-safe), and CUDA cannot be used in a child forked after the parent has
touched the driver (``torch.cuda.is_available()`` already does). So ``fork``
is used only for CPU ranks of one thread each, and the slower but always-safe
``forkserver`` otherwise.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import sys
import traceback
from multiprocessing.connection import wait
from typing import Any, Callable

import torch

RANK_TIMEOUT_S = 900.0


class RankFailed(RuntimeError):
    """A rank raised or died; the others were stopped."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_method(threads_per_rank: int) -> str:
    return "fork" if threads_per_rank == 1 and not torch.cuda.is_available() else "forkserver"


def _rank_entry(fn: Callable[..., Any], rank: int, world_size: int, port: int, conn: Any, args: tuple) -> None:
    """Report, then leave with ``os._exit``: nothing in a rank needs cleaning up, and
    tearing gloo down can hang in ProcessGroupGloo's destructor once DDP's
    reducer lets go of it, so the process group is never destroyed."""
    code = 0
    try:
        conn.send(("ok", fn(rank, world_size, port, *args)))
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        code = 1
        conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    conn.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_ranks(fn: Callable[..., Any], world_size: int, threads_per_rank: int, args: tuple = ()) -> Any:
    """Run ``fn(rank, world_size, port, *args)`` in ``world_size`` processes; return rank 0's value.

    ``fn`` must be a module-level function (forkserver pickles it). The first
    rank to raise or die stops all the others at once, and its error is
    re-raised here: a collective waiting on a dead peer would otherwise
    block until gloo's timeout. Ranks are not daemons, because a daemon may
    not start DataLoader workers; they are stopped here on every exit path.
    """
    method = start_method(threads_per_rank)
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["torch", "objectives"])
    port = free_port()
    procs, conns = [], {}
    for rank in range(world_size):
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_rank_entry, args=(fn, rank, world_size, port, send, args))
        proc.start()
        send.close()
        procs.append(proc)
        conns[recv] = rank
    try:
        return _collect(procs, conns)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _collect(procs: list, conns: dict) -> Any:
    results: dict[int, Any] = {}
    sentinels = {proc.sentinel: rank for rank, proc in enumerate(procs)}
    pending = dict(conns)
    while pending:
        ready = wait(list(pending) + list(sentinels), timeout=RANK_TIMEOUT_S)
        if not ready:
            raise RankFailed(f"no rank finished within {RANK_TIMEOUT_S:.0f} s")
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

"""DDP rendezvous when several trials start ranks at once (several GPU slots):
the launcher holds its TCPStore's port from the moment the kernel picks it,
so no other trial can draw the same port before the ranks join. Real gloo
ranks on the CPU."""
from __future__ import annotations

import errno
import multiprocessing as mp
import socket
from concurrent.futures import ProcessPoolExecutor

import torch
import torch.distributed as dist

from objectives.knobs.parallel import init_process_group
from objectives.launch import run_ranks


def _port_taken_then_sum(rank: int, world_size: int, port: int) -> dict:
    """Before joining, try to take the rendezvous port as another trial's rank 0 would."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind(("127.0.0.1", port))
        taken_by_launcher = False
    except OSError as err:
        taken_by_launcher = err.errno == errno.EADDRINUSE
    finally:
        probe.close()
    init_process_group(rank, world_size, port)
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    return {"taken_by_launcher": taken_by_launcher, "sum": value.item(), "port": port}


def _one_trial(_: int) -> dict:
    return run_ranks(_port_taken_then_sum, world_size=2, threads_per_rank=1)


def test_the_rendezvous_port_is_held_until_the_ranks_join() -> None:
    # was: free_port() bound port 0, closed it and handed the number on, free for anyone to take
    assert run_ranks(_port_taken_then_sum, world_size=2, threads_per_rank=1)["taken_by_launcher"] is True


def test_three_two_rank_trials_starting_at_once_all_join() -> None:
    with ProcessPoolExecutor(3, mp_context=mp.get_context("fork")) as pool:
        results = list(pool.map(_one_trial, range(3)))
    assert [r["sum"] for r in results] == [3.0, 3.0, 3.0]
    assert len({r["port"] for r in results}) == 3

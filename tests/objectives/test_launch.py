"""DDP rendezvous when several trials start ranks at once (several GPU slots):
the launcher holds its TCPStore's port from the moment the kernel picks it,
so no other trial can draw the same port before the ranks join. Real gloo
ranks on the CPU."""
from __future__ import annotations

import errno
import multiprocessing as mp
import socket
import time
from concurrent.futures import ProcessPoolExecutor

import pytest
import torch
import torch.distributed as dist

from objectives.knobs.parallel import init_process_group
from objectives.launch import LIMIT_MARGIN_S, RankFailed, run_ranks, trial_limit_s


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


def _peer_late_by(rank: int, world_size: int, port: int, wait_limit_s: float, late_s: float) -> float:
    init_process_group(rank, world_size, port, wait_limit_s)
    if rank == 1:
        time.sleep(late_s)  # compiling or evaluating alone, as one rank of a DDP trial may
    value = torch.tensor([1.0])
    dist.all_reduce(value)
    return value.item()


def test_a_collective_waits_on_a_late_peer_as_long_as_the_limit_it_is_given() -> None:
    # the limit was a fixed 300 s (and the launcher's 900 s), shorter than a GPU trial may legitimately take
    assert run_ranks(_peer_late_by, 2, 1, (8.0, 2.0), timeout_s=30) == 2.0
    with pytest.raises(RankFailed, match="rank 0 failed"):
        run_ranks(_peer_late_by, 2, 1, (0.5, 4.0), timeout_s=30)
    with pytest.raises(RankFailed, match="no rank finished within 1 s"):
        run_ranks(_peer_late_by, 2, 1, (8.0, 4.0), timeout_s=1)


def test_a_trials_ranks_wait_as_long_as_the_trial_may_run() -> None:
    assert trial_limit_s({}) == 600 + 1800 + LIMIT_MARGIN_S  # conf/config.yaml's trial section
    assert trial_limit_s({"trial": {"timeout_s": 4000, "compile_timeout_s": 900}}) == 4900 + LIMIT_MARGIN_S

"""Ending a trial's whole process tree: the trial, its DDP ranks and its
DataLoader workers, so that a trial that timed out or was stopped leaves no
orphan holding memory or a GPU."""
from __future__ import annotations

import psutil


def kill_tree(pid: int, timeout_s: float = 5.0) -> None:
    """SIGKILL a process and every descendant (ranks, loader workers); no orphans."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=timeout_s)

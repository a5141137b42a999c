"""Fault injection for the sweep's failure tests: test support, not a product objective.

Used through the product's user-objective path, in a trial's child process:

- ``objective=custom objective.callable=faulty_objective:objective``: the
  callable gets the whole trial config and returns metrics. The fault comes
  from an extra top-level section the tests add with Hydra's append syntax,
  ``+fault.kind=<kind> +fault.on_batch_size=<n>`` (or the kind in the environment,
  ``SEARCH_TEST_FAULT_KIND``, to resume one study with another) (the objectives' parser
  ignores top-level sections it does not know). It fires only on the trial
  whose ``batch_size`` equals ``on_batch_size``, or on every trial when
  ``on_batch_size`` is absent; other trials return plausible metrics from a
  tiny real torch computation.
- ``objective.model`` / ``objective.train_dataset`` ``_target_`` specs:
  ``HangingDataset`` never returns an item inside a DataLoader worker;
  ``StallingNet`` never returns from a training forward on DDP rank 1.

Kinds: ``none``, ``raise`` (RuntimeError), ``abort`` (SIGABRT), ``segfault``
(SIGSEGV), ``hang`` (sleeps forever), ``leak`` (64 MiB blocks until the
allocation fails: run it under ``trial.max_memory_bytes``), ``nan``
(non-finite val_loss and val_accuracy).
"""
from __future__ import annotations

import ctypes
import math
import os
import resource
import time
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, get_worker_info

# The kind from the environment instead, for tests that resume one study with another fault: a study resumes only
# with the configuration it was made with (search/sweep/fixed_config.py), and the environment is not part of it.
KIND_ENV = "SEARCH_TEST_FAULT_KIND"
KINDS = ("none", "raise", "abort", "segfault", "hang", "leak", "nan")
BLOCK_BYTES = 64 * 2**20
RAISED_MESSAGE = "injected fault: the training step blew up"


def _sleep_forever(marker: str | None = None) -> None:
    """Never return; first touch ``marker`` (a file path) so a test can tell where it hung."""
    if marker:
        with open(marker, "a") as f:
            f.write(f"{os.getpid()}\n")
    while True:
        time.sleep(3600)


def _no_core_dump() -> None:
    """A deliberate crash must not leave a core file behind in the tests' directories."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _leak() -> None:
    """Hold ever more touched 64 MiB blocks until an allocation fails (MemoryError
    from numpy under RLIMIT_AS); pauses between blocks so the sweep's 0.1 s
    memory sampler sees the growth."""
    held = []
    while True:
        held.append(np.ones(BLOCK_BYTES // 8, dtype=np.float64))
        time.sleep(0.02)


def inject(kind: str, marker: str | None = None) -> None:
    if kind == "none":
        return
    if kind == "raise":
        raise RuntimeError(RAISED_MESSAGE)
    if kind == "abort":
        _no_core_dump()
        os.abort()
    if kind == "segfault":
        _no_core_dump()
        ctypes.string_at(0)
    if kind == "hang":
        _sleep_forever(marker)
    if kind == "leak":
        _leak()
    if kind == "nan":
        return
    raise ValueError(f"fault.kind must be one of {', '.join(KINDS)}; got {kind!r}")


def fires(cfg: dict[str, Any]) -> str:
    """The fault kind this trial gets: the configured one when its batch size matches, else none."""
    fault = cfg.get("fault") or {}
    kind = os.environ.get(KIND_ENV) or str(fault.get("kind", "none"))
    on = fault.get("on_batch_size")
    return kind if on is None or cfg.get("batch_size") == on else "none"


def _tiny_training(batch_size: int) -> dict[str, float]:
    """A few real steps of logistic regression on two blobs: plausible figures in milliseconds."""
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (256,), generator=g)
    x = torch.randn(256, 8, generator=g) + 2.0 * y[:, None]
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    start = time.perf_counter()
    for i in range(0, 256, batch_size):
        loss = nn.functional.cross_entropy(model(x[i:i + batch_size]), y[i:i + batch_size])
        opt.zero_grad()
        loss.backward()
        opt.step()
    elapsed = max(time.perf_counter() - start, 1e-6)
    with torch.no_grad():
        logits = model(x)
        val_loss = float(nn.functional.cross_entropy(logits, y))
        val_accuracy = float((logits.argmax(1) == y).float().mean())
    return {"throughput_samples_per_s": 256 / elapsed, "val_accuracy": val_accuracy, "val_loss": val_loss,
            "vm_size_bytes": float(_vm_size_bytes())}


def _vm_size_bytes() -> int:
    """This process's address space, what ``trial.max_memory_bytes`` (RLIMIT_AS) caps."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))


def objective(cfg: dict[str, Any]) -> dict[str, float]:
    kind = fires(cfg)
    inject(kind, (cfg.get("fault") or {}).get("marker"))
    metrics = _tiny_training(int(cfg.get("batch_size") or 64))
    if kind == "nan":
        metrics.update(val_loss=math.nan, val_accuracy=math.nan)
    return metrics


class HangingDataset(Dataset):
    """Two separable blobs whose items never come back from a DataLoader worker
    (the trial process itself reads item 0 to learn the input shape)."""

    def __init__(self, n: int = 256, dim: int = 8, marker: str | None = None) -> None:
        self.marker = marker
        g = torch.Generator().manual_seed(0)
        self.y = torch.randint(0, 2, (n,), generator=g)
        self.x = torch.randn(n, dim, generator=g) + 2.0 * self.y[:, None]

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if get_worker_info() is not None:
            _sleep_forever(self.marker)
        return self.x[i], self.y[i]


class Blobs(HangingDataset):
    """The same data, served normally."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


def _rank() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "0"))


class StallingNet(nn.Module):
    """A small MLP whose training forward never returns on DDP rank ``stall_rank``,
    so the other rank waits for it in DDP's gradient all-reduce."""

    def __init__(self, dim: int = 8, hidden: int = 16, stall_rank: int = 1, marker: str | None = None) -> None:
        super().__init__()
        self.marker = marker
        self.body = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 2)
        self.stall_rank = stall_rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and torch.is_grad_enabled() and _rank() == self.stall_rank:
            _sleep_forever(self.marker)
        return self.head(self.body(x))

"""A user objective whose torch.compile takes a known time: test support, not
a product objective.

Used through the product's user-objective path in a trial's real child
process (``objective.callable=slow_compile_objective:objective``). It
compiles a tiny model with the product's own ``apply_compile`` through a
backend that sleeps ``compile_s`` seconds (top-level section ``+slow.compile_s``)
before handing back the eager graph, as a slow Inductor or max-autotune
compile would, then trains for ``train_s`` seconds (``+slow.train_s``).
"""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn

from objectives.config import ParallelConfig
from objectives.knobs.compile import apply_compile

BACKEND = "search_test_slow_compile"


def objective(cfg: dict[str, Any]) -> dict[str, float]:
    slow = cfg.get("slow") or {}
    compile_s, train_s = float(slow.get("compile_s", 1.0)), float(slow.get("train_s", 0.1))

    def slow_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
        time.sleep(compile_s)
        return gm.forward

    torch._dynamo.reset()
    torch._dynamo.register_backend(name=BACKEND)(slow_backend)
    model = apply_compile(ParallelConfig(compile="default", compile_backend=BACKEND), nn.Linear(4, 2))
    started = time.perf_counter()
    model(torch.randn(3, 4))  # the compile happens here
    compiled_at = time.perf_counter()
    while time.perf_counter() - compiled_at < train_s:
        model(torch.randn(3, 4))
    return {"compile_s": compiled_at - started, "train_s": time.perf_counter() - compiled_at}

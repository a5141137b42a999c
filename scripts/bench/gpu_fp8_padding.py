"""fp8 (torchao float8, tensorwise) when a batch's token count is not a multiple of 16, and what padding costs.

torch._scaled_mm wants the inner dimension of its operands a multiple of 16. The Linear layers
objectives/knobs/precision.py converts have both weight dimensions multiples of 16, but the backward's
weight-gradient matmul runs over the batch's tokens, which the batch size and the sequence length set.
torchao's ``Float8LinearConfig(pad_inner_dim=True)`` pads that dimension with zeros when it is not aligned.

Part 1: a two-layer MLP, 3 x 63 = 189 tokens, forward and backward, eager and compiled, pad off and on:
which run. Part 2: gpt2-small's MLP shape (4 blocks of 768 -> 3072 -> 768), 16 x 1024 tokens (aligned),
compiled, pad off and on: ms per forward and backward, timed interleaved (A B A B), medians of CUDA-event
timings. Needs torch with CUDA (sm_89+) and torchao; nothing else of the project.

Usage: python scripts/bench/gpu_fp8_padding.py
"""
from __future__ import annotations

import statistics

import torch
from torch import nn
from torchao.float8 import Float8LinearConfig, convert_to_float8_training


def fp8_model(layers: list[int], pad: bool, blocks: int = 1) -> nn.Module:
    mods: list[nn.Module] = []
    for _ in range(blocks):
        for i, (a, b) in enumerate(zip(layers, layers[1:])):
            mods += [nn.Linear(a, b), nn.GELU()] if i < len(layers) - 2 else [nn.Linear(a, b)]
    model = nn.Sequential(*mods).cuda()
    convert_to_float8_training(model, config=Float8LinearConfig(pad_inner_dim=pad))
    return model


def step(model: nn.Module, x: torch.Tensor) -> None:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        model(x).float().square().mean().backward()


def odd_tokens() -> None:
    print("part 1: 189 tokens (3 x 63), Linear 64 -> 128 -> 64")
    for pad in (False, True):
        for compiled in (False, True):
            torch._dynamo.reset()
            model = fp8_model([64, 128, 64], pad)
            run = torch.compile(model) if compiled else model
            try:
                step(run, torch.randn(3, 63, 64, device="cuda"))
                torch.cuda.synchronize()
                ok = all(torch.isfinite(p.grad).all() for p in model.parameters())
                outcome = "ok" if ok else "non-finite gradients"
            except Exception as err:  # noqa: BLE001 - the point is to see which error
                outcome = f"fails: {type(err).__name__}: {str(err).splitlines()[0][:160]}"
            print(f"  pad_inner_dim={pad!s:5} {'compiled' if compiled else 'eager   '}: {outcome}")


def ms_per_step(model: nn.Module, x: torch.Tensor, steps: int = 20) -> float:
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step(model, x)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def aligned_cost() -> None:
    print("part 2: 16 x 1024 tokens, 4 blocks of Linear 768 -> 3072 -> 768, compiled")
    torch._dynamo.reset()
    x = torch.randn(16, 1024, 768, device="cuda")
    models = {pad: torch.compile(fp8_model([768, 3072, 768], pad, blocks=4)) for pad in (False, True)}
    for model in models.values():
        for _ in range(3):  # compile, then warm
            step(model, x)
    torch.cuda.synchronize()
    rounds = {False: [], True: []}
    for _ in range(3):
        for pad, model in models.items():
            rounds[pad].append(ms_per_step(model, x))
    for pad, ms in rounds.items():
        rounds_ms = ", ".join(f"{m:.3f}" for m in ms)
        print(f"  pad_inner_dim={pad!s:5}: {statistics.median(ms):.3f} ms per step (rounds {rounds_ms})")
    print(f"  pad on / pad off: {statistics.median(rounds[True]) / statistics.median(rounds[False]):.3f}")


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(0))
    odd_tokens()
    aligned_cost()

"""Where a compiled gpt2-small bf16 training step spends its time, and whether compiling the loss
with the model closes part of the MFU gap.

The trial compiles the model alone (objectives/knobs/compile.py) and computes the cross-entropy over
the (batch, 1024, 50257) logits in eager mode, where autocast runs it in fp32. This times one step
(forward, loss, backward, fused AdamW) three ways on the same model and data:

  model_compiled   torch.compile(model), eager loss: what a trial runs today
  loss_compiled    torch.compile(model) and torch.compile(loss)
  step_compiled    torch.compile of model and loss as one function

then profiles `model_compiled` for a few steps and sums CUDA kernel time by kind (matmul, attention,
the loss, the optimizer, Inductor's fused kernels, the rest). Each variant first checks that its
loss equals the eager model's on the same weights and batch (bf16 tolerance).
The warm-up column holds the compiles; a later variant may reuse Inductor's cache, so it does not
compare compile times.

Needs torch and this repository only (no optuna, hydra or mlflow):
    python scripts/bench/gpu_step_profile.py [--batch 64] [--steps 20]
A dry run on a CPU: --size tiny --device cpu --backend aot_eager --dtype float32
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from objectives.gpt import GPT, SIZES, model_flops_per_token  # noqa: E402
from objectives.workload import cross_entropy  # noqa: E402


def _mfu_module():
    """search/measure/mfu.py (the peaks the trials use) read as a file: importing it through the search
    package would import omegaconf, which the GPU machine's image lacks."""
    spec = importlib.util.spec_from_file_location("mfu", REPO / "search" / "measure" / "mfu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peak_flops_per_s = _mfu_module().peak_flops_per_s

KINDS = (  # (kind, substrings of a kernel's name), first match wins
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("matmul", ("gemm", "nvjet", "cutlass", "sm90_xmma", "matmul", "cublas")),
    ("loss", ("softmax", "cross_entropy", "nll_loss", "log_softmax")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("inductor fused", ("triton_",)),
)


def kind_of(name: str) -> str:
    low = name.lower()
    return next((kind for kind, keys in KINDS if any(k in low for k in keys)), "other")


def make_step(variant: str, model: torch.nn.Module, opt: torch.optim.Optimizer, dtype: torch.dtype,
              device: str, backend: str):
    autocast = torch.autocast(device, dtype=dtype, enabled=dtype != torch.float32)
    if variant == "eager":
        forward = model

        def loss_of(x, y):
            return cross_entropy(forward(x), y)
    elif variant == "model_compiled":
        forward = torch.compile(model, backend=backend)

        def loss_of(x, y):
            return cross_entropy(forward(x), y)
    elif variant == "loss_compiled":
        forward, loss_c = torch.compile(model, backend=backend), torch.compile(cross_entropy, backend=backend)

        def loss_of(x, y):
            return loss_c(forward(x), y)
    elif variant == "step_compiled":
        loss_of = torch.compile(lambda x, y: cross_entropy(model(x), y), backend=backend)
    else:
        raise ValueError(variant)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_of(x, y)
        loss.backward()
        opt.step()
        return loss.detach()

    def loss_only(x, y):
        with torch.no_grad(), autocast:
            return loss_of(x, y).float()

    return step, loss_only


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="gpt2-small", choices=sorted(SIZES))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per variant (after 3 warm-up steps)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--variants", nargs="+", default=["model_compiled", "loss_compiled", "step_compiled"])
    ap.add_argument("--profile-steps", type=int, default=3, help="0: no profile")
    args = ap.parse_args()
    dtype, device = getattr(torch, args.dtype), args.device
    n_layer, n_head, d_model, seq_len, vocab = SIZES[args.size]
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    peak = peak_flops_per_s(name, {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[args.dtype])
    print(f"{name}, torch {torch.__version__}, {args.size} at batch {args.batch}, {args.dtype}, backend {args.backend}")

    gen = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 256, (args.batch, seq_len), generator=gen).to(device),
                torch.randint(0, 256, (args.batch, seq_len), generator=gen).to(device)) for _ in range(4)]
    torch.manual_seed(0)
    reference = GPT(n_layer, n_head, d_model, seq_len, vocab).to(device)
    flops_per_token = model_flops_per_token(reference)
    state = {k: v.clone() for k, v in reference.state_dict().items()}
    _, eager_loss = make_step("eager", reference, torch.optim.AdamW(reference.parameters()), dtype, device,
                              args.backend)
    want = eager_loss(*batches[0]).item()
    del reference
    rows = []
    for variant in args.variants:
        model = GPT(n_layer, n_head, d_model, seq_len, vocab).to(device)
        model.load_state_dict(state)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device == "cuda")
        step, loss_only = make_step(variant, model, opt, dtype, device, args.backend)
        got = loss_only(*batches[0]).item()
        if abs(got - want) > 2e-2 * abs(want):
            raise SystemExit(f"{variant}: loss {got:.5f} differs from the eager model's {want:.5f}")
        t0 = time.perf_counter()
        for i in range(3):
            step(*batches[i % len(batches)])
        sync(device)
        warm_s = time.perf_counter() - t0
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for i in range(args.steps):
            step(*batches[i % len(batches)])
        sync(device)
        step_s = (time.perf_counter() - t0) / args.steps
        tokens_per_s = args.batch * seq_len / step_s
        mfu = flops_per_token * tokens_per_s / peak if peak else float("nan")
        peak_gb = torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else float("nan")
        rows.append((variant, step_s * 1e3, args.batch / step_s, mfu, peak_gb, warm_s, got))
        print(f"{variant}: {step_s * 1e3:.1f} ms/step, {args.batch / step_s:.1f} samples/s, MFU {mfu:.3f}, "
              f"peak {peak_gb:.1f} GB, warm-up {warm_s:.1f} s, loss {got:.4f} (eager {want:.4f})", flush=True)
        if variant == "model_compiled" and args.profile_steps and device == "cuda":
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for i in range(args.profile_steps):
                    step(*batches[i % len(batches)])
                sync(device)
            by_kind: dict[str, float] = {}
            events = [e for e in prof.key_averages() if e.device_time_total > 0]
            for e in events:
                by_kind[kind_of(e.key)] = by_kind.get(kind_of(e.key), 0.0) + e.device_time_total
            total = sum(by_kind.values())
            print(f"profile of {variant}, {args.profile_steps} steps: {total / 1e3 / args.profile_steps:.1f} ms "
                  f"of kernels per step")
            for kind, us in sorted(by_kind.items(), key=lambda kv: -kv[1]):
                print(f"  {kind:15s} {us / 1e3 / args.profile_steps:7.1f} ms/step  {us / total:6.1%}")
            print("  top kernels:")
            for e in sorted(events, key=lambda e: -e.device_time_total)[:12]:
                print(f"    {e.device_time_total / 1e3 / args.profile_steps:7.2f} ms/step  {kind_of(e.key):14s} "
                      f"{e.key[:90]}")
        del model, opt, step, loss_only
        if device == "cuda":
            torch.cuda.empty_cache()
    print("\n| variant | ms/step | samples/s | MFU | peak GB | warm-up s |\n| --- | --- | --- | --- | --- | --- |")
    for variant, ms, sps, mfu, gb, warm, _ in rows:
        print(f"| {variant} | {ms:.1f} | {sps:.1f} | {mfu:.3f} | {gb:.1f} | {warm:.1f} |")


if __name__ == "__main__":
    main()

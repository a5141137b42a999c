"""torch.compile: the step's graphs compiled ahead of the timed windows.

Compilation happens on the first forward and backward, which fall inside the
warm-up steps (a config rule keeps ``train.warmup_steps >= 1`` when compiling),
so throughput never contains it; the loop reports the extra time of the first
step as ``compile_wall_s``. ``compile_backend`` is Inductor unless a test or a
debugging session picks a cheaper backend (``aot_eager`` traces the same
graphs without generating kernels). Compile time counts against its own
budget, ``trial.compile_timeout_s``, not ``trial.timeout_s``: the sweep reads
how long the trial has compiled from objectives/compile_clock.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from objectives.compile_clock import start_compile_clock
from objectives.config_check import CombinationError
from objectives.knobs.knob import Knob
from objectives.knobs.parallel import ParallelConfig, unwrap

if TYPE_CHECKING:
    from torch import nn

    from objectives.config import TrialConfig
    from objectives.workload import LossFn

COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")


def check_combinations(cfg: TrialConfig) -> None:
    if cfg.parallel.compile != "none" and cfg.train.warmup_steps < 1:
        raise CombinationError(
            f"train.warmup_steps must be >= 1 with parallel.compile={cfg.parallel.compile}, so compilation stays "
            f"out of throughput; got {cfg.train.warmup_steps}; fix: train.warmup_steps=5",
            ("parallel.compile", "train.warmup_steps"),
        )


def apply_compile(parallel: ParallelConfig, model: nn.Module) -> nn.Module:
    """The compiled module (an OptimizedModule) or the model itself for ``compile: none``."""
    if parallel.compile == "none":
        return model
    import torch

    mode = None if parallel.compile == "default" else parallel.compile
    if mode == "max-autotune":
        quiet_autotune_tables()
    start_compile_clock()
    return torch.compile(model, mode=mode, backend=parallel.compile_backend)


CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # both turn on triton.cudagraphs (torch._inductor.list_mode_options)


def needs_stable_grads(parallel: ParallelConfig, device_type: str) -> bool:
    """Gradient accumulation through a model compiled with CUDA graphs needs ``.grad`` buffers allocated outside
    the graphs (objectives/train.py, ``stable_grads``); on a CPU no graph is captured."""
    return device_type == "cuda" and parallel.compile in CUDA_GRAPH_MODES and parallel.grad_accum > 1


def quiet_autotune_tables() -> None:
    """Inductor's max-autotune writes every tuned matmul's table of candidate kernels and their timings
    straight to stderr (a dozen lines per shape): they filled `selftest`'s output in the first GPU runs
    (2026-11-26). With the tables off, torch 2.11 still wrote an "Autotune Choices Stats" line of JSON for
    every tuned matmul (gpt2-small on an H200, 2026-11-27). The trial reports its own compile time and
    throughput, so both are left out: a module flag of torch._inductor.select_algorithm and an Inductor
    config flag, each read when its output would be written."""
    try:
        from torch._inductor import config, select_algorithm
    except ImportError:  # a torch without Inductor: max-autotune fails on its own, with its own message
        return
    select_algorithm.PRINT_AUTOTUNE = False
    config.max_autotune_report_choices_stats = False


def uncompiled(model: nn.Module) -> nn.Module:
    """The module as built, without DDP's wrapper or torch.compile's: evaluation runs it eagerly.

    Evaluating the compiled module would compile again, for eval mode and no_grad, inside the trial:
    for ``max-autotune`` that is minutes (gpt2-small's training graphs had not finished compiling after
    210 s on an H200), with CUDA graphs another graph pool, and under DDP the other ranks wait at their
    next collective while rank 0 alone compiles. The parameters are the same tensors, so the figures
    are the same maths."""
    module = unwrap(model)
    return getattr(module, "_orig_mod", module)  # torch._dynamo.eval_frame.OptimizedModule keeps the original


def apply_compile_loss(parallel: ParallelConfig, loss_fn: LossFn) -> LossFn:
    """The training loss compiled on its own graph when the model is compiled, else the loss as it is.

    Outside the model's graph the loss runs eagerly, and autocast runs cross-entropy in fp32 over the
    whole logits tensor: for gpt2-small at batch 64 that is (64 x 1024 x 50257) logits copied to fp32,
    a softmax kernel each way and 13 GB more peak memory. Compiled, Inductor fuses the cast, the
    log-softmax and the gather: on an H200 (bf16, torch 2.11) a step went from 427 to 489 samples/s
    (MFU 0.378 to 0.433) and peak memory from 58 to 45 GB (scripts/bench/gpu_step_profile.py,
    docs/BENCHMARKS.md); a trial ran it at 486.5 samples/s (MFU 0.431). Mode default whatever the
    model's: the loss has no matmul for max-autotune to tune, and CUDA graphs (reduce-overhead) of this
    second graph have not run on a GPU here.
    Evaluation keeps the eager loss and the eager model (``uncompiled``), so nothing compiles again in
    the middle of a trial.
    """
    if parallel.compile == "none":
        return loss_fn
    import torch

    return torch.compile(loss_fn, backend=parallel.compile_backend)


def compile_wall_s(step_times_s: list[float], timed_median_s: float) -> float:
    """What the first step took beyond a steady step: the compilation."""
    return max(0.0, step_times_s[0] - timed_median_s) if step_times_s else 0.0


KNOB = Knob(
    name="compile",
    section="parallel",
    values="`parallel.compile`: `none`, `default`, `reduce-overhead`, `max-autotune`; `parallel.compile_backend`",
    acts_on="model",
    rules={
        "parallel.compile": (f"one of {', '.join(COMPILE_MODES)}", lambda v: v in COMPILE_MODES, "default"),
        "parallel.compile_backend": ("a torch.compile backend name", lambda v: v != "", "inductor"),
    },
    check_combinations=check_combinations,
    combination_rules=("parallel.compile other than none needs train.warmup_steps >= 1 (compilation stays out "
                       "of throughput)",),
    applies=("apply_compile", "apply_compile_loss"),
    speed_only=('parallel.compile', 'parallel.compile_backend'),
)

"""``run_trial(cfg) -> TrialResult``: one trial, top to bottom.

build -> model pruning -> precision -> parallelize -> optimizer -> loop ->
evaluate. Every knob is applied by its own ``apply_*`` function from
``objectives.knobs``, here and nowhere else, in this order:

- model pruning first, on the plain module, because torch-pruning traces the
  graph and replaces layers, and parameter/FLOP counts must be taken on
  either side of it;
- precision next, because fp8 swaps Linear modules and DDP must wrap the
  final modules;
- DDP after that, so it registers its hooks on the final parameters;
- the optimizer last, so it holds exactly those parameters.

With ``parallel.devices > 1`` this process starts one process per rank
(objectives.launch) and returns rank 0's result; it does no torch work of
its own first, which keeps forking safe.
"""

from __future__ import annotations

import math
import time

import torch
from torch.utils.data import DataLoader

from objectives import measure
from objectives.config import TrialConfig, parse_config
from objectives.digits import build_datasets, build_model, example_input
from objectives.knobs.batch_size import apply_lr_scaling, global_batch_size, steps_for_budget
from objectives.knobs.loader import apply_loader
from objectives.knobs.model_pruning import apply_model_pruning, finalize_model_pruning
from objectives.knobs.parallel import (
    apply_ddp,
    apply_threads,
    backend,
    check_parallel,
    device_for_rank,
    init_process_group,
    unwrap,
)
from objectives.knobs.precision import apply_precision, check_precision
from objectives.launch import run_ranks, start_method
from objectives.result import TrialResult
from objectives.sampling import ShardedEpochSampler
from objectives.timing import plan_windows, throughput_summary
from objectives.train import evaluate, train


def run_trial(cfg: dict) -> TrialResult:
    """Train the configured workload for its sample budget and measure it.

    Raises ConfigError for a value this machine cannot run (fp16/tf32/fp8
    without CUDA, more ranks than devices), and RuntimeError if any rank
    fails; a non-finite loss is not an error but the outcome "diverged".
    """
    trial = parse_config(cfg)
    check_precision(trial.precision, "cuda" if torch.cuda.is_available() else "cpu")
    check_parallel(trial.parallel)
    if trial.parallel.devices == 1:
        return TrialResult.from_dict(trial_on_rank(0, 1, 0, trial))
    result = run_ranks(trial_on_rank, trial.parallel.devices, trial.parallel.threads, (trial,))
    return TrialResult.from_dict(result)


def trial_on_rank(rank: int, world_size: int, port: int, cfg: TrialConfig) -> dict:
    """The whole trial as one rank runs it; returns TrialResult.to_dict() (rank 0's is the answer)."""
    apply_threads(cfg.parallel)
    device = device_for_rank(rank)
    if world_size > 1:
        init_process_group(rank, world_size, port)
    torch.manual_seed(cfg.train.seed)  # identical initial weights on every rank
    train_set, val_set = build_datasets(cfg.objective)
    model = build_model(cfg.objective)
    example = example_input(cfg.objective)
    metrics: dict[str, float] = {
        "params_count_before_model_pruning": measure.params_count(model),
        "flops_per_sample_before_model_pruning": measure.flops_per_sample(model, example),
    }

    model = apply_model_pruning(cfg.model_pruning, model, example, head=model.head)
    metrics["params_count"] = measure.params_count(model)
    metrics["flops_per_sample"] = measure.flops_per_sample(model, example)

    model, precision = apply_precision(cfg.precision, model.to(device), device.type)
    model = apply_ddp(cfg.parallel, model, device)

    global_batch = global_batch_size(cfg.batch_size, world_size)
    lr = apply_lr_scaling(cfg.optim, global_batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg.optim.weight_decay)

    torch.manual_seed(cfg.train.seed + 7919 * (rank + 1))  # different augmentation per rank
    sampler = ShardedEpochSampler(len(train_set), cfg.batch_size, rank, world_size, cfg.train.seed)
    loader = apply_loader(cfg.loader, train_set, cfg.batch_size, sampler)
    steps = steps_for_budget(cfg.train.budget_samples, global_batch)
    plan = plan_windows(steps, cfg.train.warmup_steps, cfg.train.window_steps)
    log = train(model, optimizer, loader, sampler, steps, plan, precision, device)
    finalize_model_pruning(unwrap(model))

    metrics.update(throughput_summary(log.step_times_s, plan, global_batch))
    metrics.update(
        samples_trained=log.steps_done * global_batch,
        train_wall_s=log.train_wall_s,
        train_loss_final=log.train_loss_final,
        lr_effective=lr,
        params_nonzero=measure.params_nonzero(model),
        loader_worker_processes=log.loader_worker_processes,
        steps=log.steps_done,
    )
    info = {
        "precision_used": cfg.precision,
        "autocast_dtype": log.logits_dtype,
        "world_size": str(world_size),
        "device": device.type,
    }
    if world_size > 1:
        info["ddp_backend"] = backend()
        info["rank_start_method"] = start_method(cfg.parallel.threads)

    if log.diverged_at_step is not None:
        metrics["peak_rss_bytes"] = measure.peak_rss_bytes()
        finite = {k: float(v) for k, v in metrics.items() if math.isfinite(v)}
        reason = f"non-finite training loss {log.train_loss_final} at step {log.diverged_at_step} of {steps}"
        return TrialResult("diverged", finite, info, reason).to_dict()

    if rank == 0:
        start = time.perf_counter()
        val_loader = DataLoader(val_set, batch_size=cfg.train.eval_batch_size)
        metrics.update(evaluate(unwrap(model), val_loader, precision, device))
        metrics["eval_wall_s"] = time.perf_counter() - start
    metrics["peak_rss_bytes"] = measure.peak_rss_bytes()
    if world_size > 1:
        torch.distributed.barrier()  # keep peers alive until rank 0 has evaluated
    return TrialResult("ok", {k: float(v) for k, v in metrics.items()}, info).to_dict()

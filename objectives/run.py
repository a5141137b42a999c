"""``run_trial(cfg) -> TrialResult``: one trial, top to bottom.

build the workload -> model pruning -> precision -> activation checkpointing
-> channels_last -> compile -> parallelize -> optimizer -> loader -> loop ->
evaluate -> result. Every workload (digits, gpt, resnet, the user's
``_target_`` objective) is a Workload record and goes through this one path;
the user's ``objective.callable`` trains itself and is only wrapped. Every
knob is applied by its own ``apply_*`` function from ``objectives.knobs``,
here and in the builds (objectives/build.py) and nowhere else, in
``objectives.knobs.RUN_ORDER``, which says why each sits where it does:

- the allocator setting (expandable segments) first, in run_trial, as the
  trial process's PYTORCH_CUDA_ALLOC_CONF: the allocator reads it once, when
  CUDA starts, and DDP ranks inherit it;
- each rank's threads before any torch work;
- model pruning first on the model, on the plain module, because
  torch-pruning traces the graph and replaces layers, and parameter/FLOP
  counts must be taken on either side of it;
- precision next, because fp8 swaps Linear modules;
- activation checkpointing after that, so it wraps the final blocks;
- channels_last before compile, so compile sees the memory format it will run;
- compile before DDP, as torchtitan does, so DDP's hooks see the compiled
  module's parameters;
- the LR rule and the optimizer last, so it holds exactly the final parameters;
- the loader (workers, pinned memory, augmentation on the device) and the
  loop (gradient accumulation) after the model.

Every knob's hardware check runs first, against the facts torch gives
(objectives/hardware.py), the same checks the sweep ran on NVML's facts.

A knob that cannot apply to the workload (model pruning on a model with
nothing to prune, a time-to-accuracy target for a workload that measures no
accuracy) is named in info ``knobs_not_applied`` and in one warning line on
stderr, never silently dropped.

With ``parallel.devices > 1`` this process starts one process per rank
(objectives.launch) and returns rank 0's result; CUDA ranks start by
forkserver, so the hardware facts read here do not break them.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import torch
from torch.utils.data import DataLoader

from objectives import measure
from objectives.allocator import warm_allocator
from objectives.build import BuiltModel, build_loader, build_model, measures_accuracy
from objectives.config import CustomConfig, TrialConfig, parse_config
from objectives.custom import not_applied_line, run_callable
from objectives.hardware import from_torch
from objectives.in_trial_stopping import EarlyStop, Report, plan_early_stop
from objectives.knobs import check_hardware
from objectives.knobs.batch_size import steps_for_budget
from objectives.knobs.compile import compile_wall_s, needs_stable_grads, uncompiled
from objectives.knobs.memory import apply_expandable_segments
from objectives.knobs.model_pruning import finalize_model_pruning
from objectives.knobs.parallel import (
    COLLECTIVE_TIMEOUT_S,
    apply_threads,
    backend,
    device_for_rank,
    init_process_group,
    unwrap,
)
from objectives.launch import run_ranks, start_method, trial_limit_s
from objectives.result import NOT_APPLIED_WARNING, THROUGHPUT_WARNING, WARNINGS, TrialResult
from objectives.time_to_accuracy import plan_target_accuracy
from objectives.timing import (
    WindowPlan,
    input_summary,
    plan_windows,
    throughput_only_steps,
    throughput_summary,
    restart_s_per_step,
    timed_intervals_unix_s,
    window_times_s,
)
from objectives.train import TrainLog, evaluate, train


def run_trial(cfg: dict, report: Report | None = None, parsed: TrialConfig | None = None,
              warn: bool = True) -> TrialResult:
    """Train the configured workload for its sample budget and measure it.

    ``parsed`` is ``cfg`` as a TrialConfig when the caller parsed it already
    (the sweep parses each trial's config once); else it is parsed here.

    ``warn``: say on stderr which knobs do not apply to this workload (info
    ``knobs_not_applied_warning`` holds the line either way). The sweep's
    isolated trials leave it to the sweep, which says each such line once
    (search/sweep/closing.py), and ``search run`` prints it after its table.

    ``report(step, val_accuracy) -> should_stop``, when given, receives the
    learning curve (objectives/in_trial_stopping.py); a trial it stops, or one whose
    throughput probe is below ``train.stop_below_samples_per_s``, ends with
    outcome "stopped_early" and the metrics measured so far.

    Raises ConfigError (HardwareError) for a value this machine cannot run
    (fp16/tf32/fp8 without CUDA, more ranks than devices), and RuntimeError if
    any rank fails; a non-finite loss is not an error but the outcome "diverged".
    """
    trial = parsed if parsed is not None else parse_config(cfg)
    apply_expandable_segments(trial.memory.expandable_segments)  # before anything starts CUDA
    if isinstance(trial.objective, CustomConfig) and trial.objective.callable is not None:
        result = run_callable(trial.objective.callable, cfg)
    else:
        check_hardware(trial, from_torch())
        if trial.parallel.devices == 1:
            result = TrialResult.from_dict(trial_on_rank(0, 1, 0, trial, report))
        else:
            limit_s = trial_limit_s(cfg)
            result = TrialResult.from_dict(run_ranks(trial_on_rank, trial.parallel.devices, trial.parallel.threads,
                                                     (trial, report, limit_s), timeout_s=limit_s))
    for key in WARNINGS if warn else ():
        if key in result.info:
            print(result.info[key], file=sys.stderr, flush=True)
    return result


def trial_on_rank(rank: int, world_size: int, port: int, cfg: TrialConfig, report: Report | None = None,
                  limit_s: float | None = None) -> dict:
    """The whole trial as one rank runs it; returns TrialResult.to_dict() (rank 0's is the answer).
    ``limit_s``: how long a collective may wait on a peer (objectives/launch.py ``trial_limit_s``)."""
    warm_allocator()  # a fresh process's C heap trains slower (objectives/allocator.py)
    apply_threads(cfg.parallel)
    device = device_for_rank(rank)
    if world_size > 1:
        init_process_group(rank, world_size, port, limit_s or COLLECTIVE_TIMEOUT_S)
    built = build_model(cfg, device, world_size)
    fed = build_loader(cfg, built, rank, world_size)
    work, model, global_batch = built.work, built.model, built.global_batch

    val_loader = None
    if rank == 0 and measures_accuracy(cfg, work) and not cfg.train.throughput_only:
        # its own generator: evaluating mid-training must not shift the training's random stream
        val_loader = DataLoader(work.val_set, batch_size=cfg.train.eval_batch_size, generator=torch.Generator())

    def evaluate_now() -> dict[str, float]:
        return evaluate(uncompiled(model), val_loader, built.precision, device, work.loss_fn) if val_loader else {}

    target = None
    if "train.target_val_accuracy" not in built.not_applied and not cfg.train.throughput_only:
        target = plan_target_accuracy(cfg.train, global_batch, evaluate_now)
    steps = steps_for_budget(cfg.train.budget_samples, global_batch)
    if cfg.train.throughput_only:
        steps = throughput_only_steps(cfg.train, steps)
    min_warmup = 1 if cfg.parallel.compile != "none" else 0  # the first step compiles
    plan = plan_windows(steps, cfg.train.warmup_steps, cfg.train.window_steps, min_warmup_steps=min_warmup)
    curve = report is not None and measures_accuracy(cfg, work) and not cfg.train.throughput_only
    per_epoch = steps_per_epoch(fed.loader, cfg.parallel.grad_accum)
    early_stop = plan_early_stop(cfg.train, plan, steps, global_batch, report if rank == 0 else None, curve,
                                 evaluate_now, per_epoch)
    log = train(model, built.optimizer, fed.loader, fed.sampler, steps, plan, built.precision, device,
                built.train_loss_fn, target, cfg.parallel.grad_accum, fed.prepare_input, early_stop,
                stable_grads=needs_stable_grads(cfg.parallel, device.type))
    finalize_model_pruning(unwrap(model))
    if log.stopped_early:  # the windows that ran: the probe's, or those before the learning curve was stopped
        plan = WindowPlan(plan.warmup_steps, plan.window_steps,
                          max(0, (log.steps_done - plan.warmup_steps) // plan.window_steps))
    metrics, info, timed_windows = measured(cfg, built, log, plan, steps, per_epoch, device, rank, world_size)
    info["measured"] = what_was_measured(cfg, early_stop if log.stopped_early else None)
    return assemble_result(metrics, info, timed_windows, log, steps, early_stop, target, val_loader, evaluate_now,
                           world_size)


def what_was_measured(cfg: TrialConfig, stopper: EarlyStop | None) -> str:
    """info `measured` (the run's MLflow tag search.info.measured): `full` (trained its budget and evaluated),
    `throughput_only` (timed, not evaluated: train.throughput_only), `probe` (stopped after its throughput
    probe: its figures are the probe's) or `pruned` (stopped part way along its learning curve)."""
    if stopper is not None:  # the early stop that ended the trial
        return "probe" if stopper.stopped_by == "probe" else "pruned"
    return "throughput_only" if cfg.train.throughput_only else "full"


def steps_per_epoch(loader: DataLoader, grad_accum: int) -> float | None:
    """Optimizer steps in one pass over this rank's loader; None for a dataset without a length."""
    try:
        return len(loader) / grad_accum or None
    except TypeError:
        return None


def measured(cfg: TrialConfig, built: BuiltModel, log: TrainLog, plan: WindowPlan, steps: int,
             per_epoch: float | None, device: torch.device, rank: int,
             world_size: int) -> tuple[dict[str, float], dict[str, str], list]:
    """The metrics and info of the training that ran, and its timed windows' wall-clock intervals."""
    model, global_batch, metrics = built.model, built.global_batch, built.metrics
    restart = restart_s_per_step(log.spans, per_epoch, log.untimed_restart_s)
    window_times = window_times_s(log.spans, plan, restart)
    metrics.update(throughput_summary(window_times, plan, global_batch))
    # The rate between epoch ends and one restart's cost, for what the restarts cost (persistent workers save some)
    between = throughput_summary(window_times_s(log.spans, plan, 0.0), plan, global_batch)
    if "throughput_samples_per_s" in between:
        metrics["throughput_between_epoch_ends_samples_per_s"] = between["throughput_samples_per_s"]
        metrics["loader_epoch_restart_s"] = restart * (per_epoch or 0.0)
    if cfg.parallel.compile != "none" and "step_time_p50_ms" in metrics:
        first_step_s = [s.seconds for s in log.spans[:1]]  # the first step is a span of its own
        metrics["compile_wall_s"] = compile_wall_s(first_step_s, metrics["step_time_p50_ms"] / 1000)
    metrics.update(input_summary(log.spans, plan))
    timed_windows = [list(interval) for interval in timed_intervals_unix_s(log.spans, plan)]
    if timed_windows:  # evaluation pauses are left out of these intervals (objectives/timing.py)
        metrics.update(timed_start_unix_s=timed_windows[0][0], timed_end_unix_s=timed_windows[-1][1],
                       timed_samples=len(window_times) * plan.window_steps * global_batch)
    if device.type == "cuda":
        metrics.update(cuda_peak_allocated_bytes=torch.cuda.max_memory_allocated(device),
                       cuda_peak_reserved_bytes=torch.cuda.max_memory_reserved(device))
    if built.work.tokens_per_sample and "throughput_samples_per_s" in metrics:
        metrics["throughput_tokens_per_s"] = metrics["throughput_samples_per_s"] * built.work.tokens_per_sample
    metrics.update(
        samples_trained=log.steps_done * global_batch,
        train_wall_s=log.train_wall_s,
        train_loss_final=log.train_loss_final,
        lr_effective=built.lr,
        params_nonzero=measure.params_nonzero(model),
        loader_worker_processes=log.loader_worker_processes,
        steps=log.steps_done,
    )
    info = {
        "model_class": type(unwrap(model)).__name__,  # OptimizedModule when compiled
        "optimizer_fused": str(bool(built.optimizer.defaults.get("fused"))).lower(),
        "precision_used": cfg.precision,
        "autocast_dtype": log.logits_dtype,
        "world_size": str(world_size),
        "device": device.type,
    }
    if built.precision.fp8_converted_layers:
        info["fp8_converted_layer_names"] = ",".join(built.precision.fp8_converted_layers)
    if built.semi_sparse_layers:
        info["model_pruning_semi_structured_layer_names"] = ",".join(built.semi_sparse_layers)
    if world_size > 1:
        info["ddp_backend"] = backend()
        info["rank_start_method"] = start_method(cfg.parallel.threads)
    if plan.warmup_steps == 0 and cfg.train.warmup_steps > 0:  # plan_windows gave the warm-up to 3 windows
        info[THROUGHPUT_WARNING] = (
            f"warning: train.budget_samples={cfg.train.budget_samples} buys {steps} step(s) of {global_batch} "
            f"samples: no warm-up step before the timed windows, so the first step's start-up cost is in "
            f"throughput; fix: train.budget_samples={4 * global_batch} or more (a warm-up step and 3 timed ones)")
    if built.not_applied:
        info["knobs_not_applied"] = ",".join(built.not_applied)
        info[NOT_APPLIED_WARNING] = not_applied_line(cfg.objective.name, built.not_applied)
    return metrics, info, timed_windows


def assemble_result(metrics: dict[str, float], info: dict[str, str], timed_windows: list, log: TrainLog, steps: int,
                    early_stop: EarlyStop | None, target: Any, val_loader: DataLoader | None,
                    evaluate_now: Any, world_size: int) -> dict:
    """The outcome (diverged, stopped_early or ok) with its metrics; evaluates the final weights when ok."""
    if log.diverged_within_steps is not None:
        metrics["peak_rss_bytes"] = measure.peak_rss_bytes()
        finite = {k: float(v) for k, v in metrics.items() if math.isfinite(v)}
        first, last = log.diverged_within_steps  # the loss is read back at window edges only (objectives/train.py)
        reason = (f"non-finite training loss within steps {first}-{last} of {steps} "
                  f"(last step's loss {log.train_loss_final})")
        return TrialResult("diverged", finite, info, reason, timed_windows).to_dict()

    if early_stop is not None:
        metrics.update(early_stop.metrics())
    if log.stopped_early:
        assert early_stop is not None
        metrics.update(early_stop.last_eval)
        metrics["peak_rss_bytes"] = measure.peak_rss_bytes()
        if world_size > 1:
            torch.distributed.barrier()
        result = TrialResult("stopped_early", {k: float(v) for k, v in metrics.items()}, info, early_stop.reason,
                             timed_windows)
        return result.to_dict()
    if target is not None:
        metrics.update(target.metrics())
    if val_loader is not None:
        if target is not None and target.last_eval:  # the loop evaluated the final weights already
            metrics.update(target.last_eval, eval_wall_s=target.last_eval_wall_s)
        else:
            start = time.perf_counter()
            metrics.update(evaluate_now())
            metrics["eval_wall_s"] = time.perf_counter() - start
    metrics["peak_rss_bytes"] = measure.peak_rss_bytes()
    if world_size > 1:
        torch.distributed.barrier()  # keep peers alive until rank 0 has evaluated
    return TrialResult("ok", {k: float(v) for k, v in metrics.items()}, info, "", timed_windows).to_dict()

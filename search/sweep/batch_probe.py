"""The optional pre-sweep batch-size probe (`hydra.sweeper.batch_size_probe=true`).

Like Lightning's BatchSizeFinder, but before the sweep and in isolated
processes: a few training steps at a candidate batch size, in the same kind
of child a trial runs in, with the same memory cap (`trial.max_memory_bytes`
on a CPU, the device's own memory on a GPU). A binary search over the
space's batch sizes finds the largest one that does not run out of memory;
larger ones leave the space with one line saying so, instead of each
becoming an `oom` trial.

The probe runs at the sweep's fixed configuration: the values set by
override, and each varied knob at its config default. A knob value that
needs less memory (bf16, model pruning) may fit a larger batch than the
probe allows; choose those values by override to probe for them.
"""
from __future__ import annotations

import dataclasses

from typing import Any, Callable

from optuna.distributions import CategoricalDistribution, IntDistribution

from search.sweep.space import Space

PROBE_STEPS = 3  # one warm-up step and two timed ones: enough to reach the steady-state peak


def probe_overrides(batch_size: int, micro_batches_per_step: int) -> list[str]:
    """A trial cut down to PROBE_STEPS steps at `batch_size` per rank and micro-batch."""
    return [f"batch_size={batch_size}", f"train.budget_samples={batch_size * micro_batches_per_step * PROBE_STEPS}",
            "train.warmup_steps=1", "train.window_steps=1", "train.target_val_accuracy=null"]


def candidates(dist: Any) -> list[int]:
    if isinstance(dist, CategoricalDistribution):
        return sorted(int(v) for v in dist.choices)
    values, b = [], 1
    while b <= dist.high:  # powers of two inside the range, and its top
        if b >= dist.low:
            values.append(b)
        b *= 2
    return sorted({*values, dist.low, dist.high})


def largest_fitting(sizes: list[int], fits: Callable[[int], bool]) -> int | None:
    """Binary search, assuming that if a batch size fits every smaller one does."""
    lo, hi, best = 0, len(sizes) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(sizes[mid]):
            best, lo = sizes[mid], mid + 1
        else:
            hi = mid - 1
    return best


def bound_batch_size(space: Space, run: Callable[[int], dict[str, Any]]) -> tuple[Space, str]:
    """The space with batch sizes above the largest that fits removed, and the line that says so.

    `run(batch_size)` runs one probe trial and returns its result dict.
    """
    dist = space.distributions.get("batch_size")
    if not isinstance(dist, (CategoricalDistribution, IntDistribution)):
        return space, "batch-size probe: batch_size is not varied by this sweep; nothing to bound"
    outcomes: dict[int, str] = {}

    def fits(batch_size: int) -> bool:
        result = run(batch_size)
        outcomes[batch_size] = result.get("outcome", "crashed")
        if outcomes[batch_size] not in ("ok", "oom", "diverged"):
            raise ProbeFailed(f"batch_size={batch_size} ended {outcomes[batch_size]}: {result.get('reason', '')}")
        return outcomes[batch_size] != "oom"

    sizes = candidates(dist)
    best = largest_fitting(sizes, fits)
    tried = ", ".join(f"{b}: {o}" for b, o in sorted(outcomes.items()))
    if best is None:
        return space, f"batch-size probe: even batch_size={sizes[0]} runs out of memory ({tried}); space left as is"
    if best == sizes[-1]:
        return space, f"batch-size probe: every batch size fits, up to {best} ({tried})"
    if isinstance(dist, CategoricalDistribution):
        bounded: Any = CategoricalDistribution([v for v in dist.choices if int(v) <= best])
    else:
        bounded = IntDistribution(dist.low, dist.low + (best - dist.low) // dist.step * dist.step,
                                  log=dist.log, step=dist.step)
    distributions = {**space.distributions, "batch_size": bounded}
    return dataclasses.replace(space, distributions=distributions), (
        f"batch-size probe: largest batch_size that fits is {best} ({tried}); larger values leave the space")


class ProbeFailed(RuntimeError):
    """A probe trial ended neither ok nor out of memory: the configuration itself is broken."""

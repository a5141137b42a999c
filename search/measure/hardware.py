"""Values this machine cannot run leave the search space before the sweep
starts, said once; forcing one is bad input, not a crashed trial."""
from __future__ import annotations

from typing import Any, Mapping

from optuna.distributions import CategoricalDistribution

from search.errors import BadInput
from search.sweep.space import Space, parse_overrides, to_override


def check_memory_cap(max_memory_bytes: Any, gpu_count: int) -> None:
    """`trial.max_memory_bytes` is RLIMIT_AS, a cap on the trial's address space, which
    makes out-of-memory real on a CPU. CUDA reserves address space far beyond any
    memory when it starts (one virtual range for the host's and every GPU's
    memory), so under the cap CUDA itself fails to start and every trial would
    end `oom`. Refused, not translated: torch.cuda.set_per_process_memory_fraction
    caps the GPU allocator, a different memory, and the GPU's own out-of-memory
    is recorded as `oom` without any cap."""
    if max_memory_bytes is not None and gpu_count > 0:
        raise BadInput(f"trial.max_memory_bytes must be null on a machine with a GPU (it caps address space, and "
                       f"CUDA reserves far more than that when it starts, so every trial would end oom); got "
                       f"{max_memory_bytes} with {gpu_count} GPU(s) visible; fix: trial.max_memory_bytes=null "
                       f"(a GPU's out of memory is an oom outcome without it), or CUDA_VISIBLE_DEVICES= for a CPU sweep")


def unrunnable(removed: Mapping[str, str], runnable: Mapping[str, list[Any]], key: str, value: Any) -> str | None:
    """Why `key=value` cannot run here, or None."""
    line = to_override(key, value)
    if line in removed:
        return removed[line]
    allowed = runnable.get(key)
    if allowed is not None and value not in allowed:
        return f"this machine runs {key} in {allowed}"
    return None


def fit_to_machine(space: Space, removed: Mapping[str, str], runnable: Mapping[str, list[Any]]) -> tuple[Space, list[str]]:
    for override in parse_overrides(space.fixed_overrides):
        if override.is_sweep_override() or override.is_delete():
            continue
        key, value = override.get_key_element(), override.value()
        why = unrunnable(removed, runnable, key, value)
        if why:
            raise BadInput(f"{to_override(key, value)} cannot run on this machine: {why}; fix: choose another value "
                           f"(python -m search doctor lists what runs here) or run on hardware that has it")
    notes, distributions = [], dict(space.distributions)
    for key, dist in space.distributions.items():
        if not isinstance(dist, CategoricalDistribution):
            continue
        dropped = {v: unrunnable(removed, runnable, key, v) for v in dist.choices}
        dropped = {v: why for v, why in dropped.items() if why}
        if not dropped:
            continue
        kept = [v for v in dist.choices if v not in dropped]
        if not kept:
            raise BadInput(f"{key} has no value this machine can run; got {list(dist.choices)} "
                           f"({'; '.join(f'{v}: {w}' for v, w in dropped.items())}); fix: add a value that runs here")
        distributions[key] = CategoricalDistribution(kept)
        notes += [f"{to_override(key, v)} ({why})" for v, why in dropped.items()]
    return Space(distributions, space.fixed_overrides), notes

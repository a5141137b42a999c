"""Values this machine cannot run leave the search space before the sweep
starts, said once; forcing one is bad input, not a crashed trial."""
from __future__ import annotations

from typing import Any, Mapping

from optuna.distributions import CategoricalDistribution

from search.errors import BadInput
from search.space import Space, parse_overrides, to_override


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

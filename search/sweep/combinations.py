"""Rules that tie two knobs together, applied to the search space before the sweep.

objectives/config.py states each rule once (fp8 needs ``parallel.compile``
other than none; 2:4 model pruning needs precision bf16 or fp16) and raises
CombinationError, which names the fields the rule ties. Here:

- both sides fixed: bad input, one line, exit 2, before anything is created;
- a swept value that breaks a rule with a fixed value leaves the space and
  is reported once, like a value the machine cannot run: never a trial;
- a swept value that breaks a rule only with another swept value stays,
  because Optuna's independent distributions cannot leave out a pair; a
  trial that draws the pair ends ``infeasible`` with the rule as its reason,
  and the sampler learns the region like any other infeasible one.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from optuna.distributions import CategoricalDistribution

from search.errors import BadInput
from search.sweep.space import Space, to_override

Parsed = TypeVar("Parsed")


def parse_probes(space: Space, parse: Callable[[list[str]], Parsed]) -> tuple[list[Parsed], dict[str, str]]:
    """``parse(extra_overrides)`` at the fixed overrides alone, then at each categorical value and numeric bound.

    Returns the configs that parsed (the fixed one first, unless the config's
    defaults for swept keys break a rule with it) and, for each swept value
    that breaks a rule with fixed values, ``'key=value' -> the rule``. Any
    other config error, or a rule broken by fixed values alone, is bad input.
    """
    from objectives import CombinationError, ConfigError

    probes: list[tuple[str, Any] | None] = [None]
    for key, dist in space.distributions.items():
        probes += [(key, v) for v in (getattr(dist, "choices", None) or (dist.low, dist.high))]
    parsed: list[Parsed] = []
    clashes: dict[str, str] = {}
    broken = ""
    for probe in probes:
        try:
            parsed.append(parse([] if probe is None else [to_override(*probe)]))
        except CombinationError as err:
            broken = str(err)
            swept = [field for field in err.fields if field in space.distributions]
            if probe is None and not swept:  # every side of the rule is fixed
                raise BadInput(str(err)) from None
            if probe is None or any(field != probe[0] for field in swept):
                continue  # a swept side: only trials that draw the pair end infeasible
            clashes[to_override(*probe)] = str(err)
        except ConfigError as err:
            raise BadInput(str(err)) from None
    if not parsed:  # every probe broke a rule: name the key left without values, else the rule
        drop_clashes(space, clashes)
        raise BadInput(f"every value of the space breaks a combination rule; {broken}")
    return parsed, clashes


def drop_clashes(space: Space, clashes: Mapping[str, str]) -> tuple[Space, list[str]]:
    """The space without the values in ``clashes``, and one note per value removed."""
    distributions, notes = dict(space.distributions), []
    for key, dist in space.distributions.items():
        values = getattr(dist, "choices", None) or (dist.low, dist.high)
        dropped = {v: clashes[to_override(key, v)] for v in values if to_override(key, v) in clashes}
        if not dropped:
            continue
        if not isinstance(dist, CategoricalDistribution):
            raise BadInput(next(iter(dropped.values())))  # a numeric range cannot lose one bound
        kept = [v for v in dist.choices if v not in dropped]
        if not kept:
            raise BadInput(f"{key} has no value the fixed settings allow; got {list(dist.choices)} "
                           f"({'; '.join(dropped.values())})")
        distributions[key] = CategoricalDistribution(kept)
        notes += [f"{to_override(key, v)} ({why})" for v, why in dropped.items()]
    return Space(distributions, space.fixed_overrides), notes

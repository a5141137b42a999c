"""The knobs' rules applied to the search space before sampling: the machine's and those that tie knobs together.

Every rule lives with its knob (objectives/knobs/): combination rules that
hold on any machine (fp8 needs ``parallel.compile`` other than none; 2:4
model pruning needs bf16 or fp16) and hardware checks against this
machine's facts (objectives/hardware.py, filled from NVML by
search/measure/machine.py; the trial runs the same checks on torch's facts).
Here they meet the space, before anything is created:

- broken by the fixed settings alone: bad input, one line, exit 2;
- a swept value that breaks a rule whatever the other swept values are
  (fp16 on a CPU; fp8 with compile fixed to none; 4 ranks on 2 cores) leaves
  the space, said once;
- swept values that break a rule only together (2 ranks x 2 threads on 2
  cores; fp8 with compile=none when both are swept) stay, and the sampler
  never proposes them together (search/sweep/rule_sampler.py, through
  ``Space.forbids``); the pairs are said once. No trial number is spent on
  them.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

from search.errors import BadInput
from search.sweep.space import Space, to_override

if TYPE_CHECKING:
    from objectives import ConfigError, TrialConfig
    from objectives.hardware import Hardware

Parsed = TypeVar("Parsed")
_MAX_COMPLETIONS = 4096  # combinations of the other swept keys tried before a value is judged to have none
_PAIRS_SHOWN = 6


def parse_probes(space: Space, parse: Callable[[list[str]], Parsed]) -> list[Parsed]:
    """``parse(extra_overrides)`` at the fixed overrides alone (first), then at each categorical value
    and numeric bound; ``parse`` checks values one by one (objectives.config.parse_values), and a
    value it refuses is wrong everywhere: bad input."""
    from objectives import ConfigError

    probes: list[tuple[str | None, list[str]]] = [(None, [])]
    for key, dist in space.distributions.items():
        probes += [(key, [to_override(key, v)]) for v in _candidates(dist)]
    parsed = []
    for key, extra in probes:
        try:
            parsed.append(parse(extra))
        except ConfigError as err:
            dist = space.distributions.get(key) if key else None
            if isinstance(dist, FloatDistribution) and "must be an int" in str(err):  # interval() is a float range
                low, high = _number(dist.low), _number(dist.high)
                raise BadInput(f"{key} takes whole numbers, and its sweep gives it real ones; got {low} to {high} "
                               f"(interval(), or range() with a fractional step); fix: "
                               f"{key}='tag(int, interval({low}, {high}))', or range() with a whole step") from None
            raise BadInput(str(err)) from None
    return parsed


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


@dataclass(frozen=True)
class Rules:
    """The knobs' rules on this machine, judged on the fixed settings plus some swept values."""

    base: TrialConfig  # the fixed settings, swept keys at their defaults (parsed value by value)
    hardware: Hardware
    swept: frozenset[str]

    def broken(self, params: Mapping[str, Any]) -> ConfigError | None:
        """A rule that ``params`` (some swept keys' values) break with the fixed settings, whatever
        the swept keys they leave out take, what this machine cannot run first (the more lasting
        reason to remove a value); None when they break none."""
        from objectives.config import with_values
        from objectives.knobs import broken_rules, machine_first

        open_keys = self.swept - set(params)
        return machine_first([err for err in broken_rules(with_values(self.base, params), self.hardware)
                              if not set(getattr(err, "fields", ())) & open_keys])

    def unused(self, params: Mapping[str, Any]) -> set[str]:
        """Swept keys that ``params`` (with the fixed settings) leave without effect."""
        from objectives.config import with_values
        from objectives.knobs import unused_keys

        return unused_keys(with_values(self.base, params)) & self.swept

    def resolved(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` as a trial on this machine runs them: a swept key written as "auto" (null) resolved.
        Called for every configuration the sampler's repeat check looks at: params without such a key
        come back as they are, without building a config."""
        from objectives.config import with_values
        from objectives.knobs import resolved_values

        if not self._resolvable.intersection(params):
            return dict(params)
        runs = resolved_values(with_values(self.base, params), self.hardware)
        return {key: runs.get(key, value) for key, value in params.items()}

    @functools.cached_property
    def _resolvable(self) -> frozenset[str]:
        from objectives.knobs import resolved_values

        return frozenset(resolved_values(self.base, self.hardware))

    def open_fields(self, params: Mapping[str, Any]) -> set[str]:
        """Swept keys left out of ``params`` that rules broken at their defaults read."""
        from objectives.config import with_values
        from objectives.knobs import broken_rules

        broken = broken_rules(with_values(self.base, params), self.hardware)
        return {f for err in broken for f in getattr(err, "fields", ())} & (self.swept - set(params))


def fit_to_rules(space: Space, base: TrialConfig, hardware: Hardware) -> tuple[Space, list[str]]:
    """The space less the values no combination lets run here, with ``forbids`` for the combinations
    that break a rule; and the lines that say so, once."""
    from objectives import HardwareError

    rules = Rules(base, hardware, frozenset(space.distributions))
    fixed = rules.broken({})  # what this machine cannot run first: a rule's fix would not make it run here
    if fixed is not None:
        where = "this machine cannot run the fixed settings" if isinstance(fixed, HardwareError) else \
            "the fixed settings break a rule"
        raise BadInput(f"{where}: {fixed}")
    distributions: dict[str, BaseDistribution] = dict(space.distributions)
    unrunnable, clashing = [], []
    for key, dist in space.distributions.items():
        dropped = {v: err for v in _candidates(dist) if (err := _without_completion(rules, space, key, v))}
        if not dropped:
            continue
        if not isinstance(dist, CategoricalDistribution):
            value, err = next(iter(dropped.items()))
            raise BadInput(f"{to_override(key, value)} (a bound of {key}'s range) cannot run: {err}")
        kept = [v for v in dist.choices if v not in dropped]
        if not kept:
            raise BadInput(f"{key} has no value this machine and the fixed settings allow; got {list(dist.choices)} "
                           f"({'; '.join(map(str, dropped.values()))})")
        distributions[key] = CategoricalDistribution(kept)
        for v, err in dropped.items():
            (unrunnable if isinstance(err, HardwareError) else clashing).append(f"{to_override(key, v)} ({err})")
    fitted = Space(distributions, space.fixed_overrides, rules.broken, rules.unused, rules.resolved)
    notes = []
    if unrunnable:
        notes.append(f"removed from the search space, this machine cannot run them: {'; '.join(unrunnable)}")
    if clashing:
        notes.append(f"removed from the search space, they break a rule with a fixed value: {'; '.join(clashing)}")
    pairs = forbidden_pairs(fitted)
    if pairs:
        more = f"; and {len(pairs) - _PAIRS_SHOWN} more pairs" if len(pairs) > _PAIRS_SHOWN else ""
        notes.append(f"never proposed together, they break a rule here: {'; '.join(pairs[:_PAIRS_SHOWN])}{more}")
    return fitted, notes


def forbidden_pairs(space: Space) -> list[str]:
    """'a=1 with b=2 (the rule)' for each pair of swept values that break a rule together."""
    pairs = []
    for (k1, d1), (k2, d2) in itertools.combinations(space.distributions.items(), 2):
        for v1, v2 in itertools.product(_candidates(d1), _candidates(d2)):
            err = space.broken_rule({k1: v1, k2: v2})
            if err is not None:
                pairs.append(f"{to_override(k1, v1)} with {to_override(k2, v2)} ({err})")
    return pairs


def _without_completion(rules: Rules, space: Space, key: str, value: Any) -> ConfigError | None:
    """The rule ``key=value`` breaks whatever the other swept keys take, else None."""
    err = rules.broken({key: value})
    if err is not None:
        return err
    others = sorted(rules.open_fields({key: value}))
    if not others:
        return None
    combos = itertools.islice(itertools.product(*(_candidates(space.distributions[k]) for k in others)),
                              _MAX_COMPLETIONS)
    first = None
    for combo in combos:
        err = rules.broken({key: value, **dict(zip(others, combo))})
        if err is None:
            return None
        first = first or err
    return first


def _candidates(dist: BaseDistribution) -> list[Any]:
    """A categorical's choices; a numeric range's bounds."""
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    return [dist.low, dist.high]  # type: ignore[attr-defined]

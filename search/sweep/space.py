"""Hydra's sweep grammar -> Optuna distributions, and back to overrides.

Hydra meanings are kept: `range(start, stop[, step])` stops before `stop`
(the old Optuna sweeper plugin made it inclusive), `interval(a, b)` is
continuous, `tag(log, ...)` samples on a log scale, `tag(int, interval(a, b))`
integers from a to b (both included).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import (
    ChoiceSweep,
    IntervalSweep,
    Override,
    RangeSweep,
    Transformer,
)
from hydra.errors import OverrideParseException
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from search.errors import BadInput

_PRIMITIVE = (str, int, float, bool, type(None))
_BARE_STRING = re.compile(r"[A-Za-z_][\w.\-/:]*")


@dataclass(frozen=True)
class Space:
    """The searched knobs (dotted config keys -> distribution) and the fixed overrides."""

    distributions: dict[str, BaseDistribution]
    fixed_overrides: list[str]
    forbids: Callable[[Mapping[str, Any]], Any] | None = None
    """``forbids(params)`` -> the rule (a ConfigError) that these swept values break together on this machine,
    else None; set once the space is fitted to the rules (search/sweep/combinations.py)."""

    unused: Callable[[Mapping[str, Any]], set[str]] | None = None
    """``unused(params)`` -> the swept keys these values leave without effect (persistent workers without
    workers); set with ``forbids``."""

    resolved: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    """``resolved(params)`` -> ``params`` as a trial on this machine runs them, a key written as "auto" (null)
    resolved (``loader.pin_memory``: on with a GPU); set with ``forbids``."""

    def broken_rule(self, params: Mapping[str, Any]) -> Any:
        return self.forbids(params) if self.forbids is not None else None

    def runs_as(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` as a trial on this machine runs them, for telling a repeat: "auto" values resolved, and
        the keys the other values leave without effect left out (with `loader.num_workers=0`, both values of
        `loader.persistent_workers` run the same training)."""
        here = self.resolved(params) if self.resolved is not None else dict(params)
        idle = self.unused(params) if self.unused is not None else set()
        return {key: value for key, value in here.items() if key not in idle}


def parse_overrides(lines: Sequence[str]) -> list[Override]:
    try:
        return OverridesParser.create().parse_overrides(list(lines))
    except OverrideParseException as err:
        first = "; ".join(line for line in str(err).splitlines() if line.strip() and not line.startswith("See "))
        raise BadInput(
            f"overrides must follow Hydra's grammar (key=value, choice(a,b), range(lo,hi), interval(lo,hi)); "
            f"{first}; fix: correct the quoted override"
        ) from None


def distribution_from_override(override: Override) -> BaseDistribution:
    key = override.get_key_element()
    value = override.value()
    if isinstance(value, ChoiceSweep):
        choices = [_categorical_value(x) for x in override.sweep_iterator(transformer=Transformer.identity)]
        if len(set(map(repr, choices))) != len(choices):
            raise BadInput(f"choice() values must be distinct; got {override.input_line}; "
                           f"fix: list each value once")
        return CategoricalDistribution(choices)
    if isinstance(value, RangeSweep):
        if value.shuffle:
            return CategoricalDistribution(list(override.sweep_iterator(transformer=Transformer.identity)))
        start, stop, step = value.start, value.stop, value.step
        if step is None or step <= 0:
            raise BadInput(f"range() step must be positive; got {key} step={step}; fix: range(lo, hi, step=1)")
        if start >= stop:
            raise BadInput(f"range(start, stop) needs start < stop (stop is excluded); got {key}=range({start}, {stop}); "
                           f"fix: raise stop above start")
        n = math.ceil((stop - start) / step)
        last = start + (n - 1) * step
        if all(isinstance(v, int) for v in (start, stop, step)):
            return IntDistribution(int(start), int(last), step=int(step))
        return FloatDistribution(float(start), float(last), step=float(step)) if n > 1 else CategoricalDistribution([float(start)])
    if isinstance(value, IntervalSweep):
        low, high = float(value.start), float(value.end)
        log = "log" in value.tags
        if low >= high:
            raise BadInput(f"interval(low, high) needs low < high; got {key}=interval({value.start}, {value.end}); "
                           f"fix: swap or widen the bounds")
        if log and low <= 0:
            raise BadInput(f"tag(log, interval(low, high)) needs low > 0; got {key} low={value.start}; fix: use a positive low")
        if "int" in value.tags:  # integers from low to high, both included, as the old Optuna sweeper plugin read it
            if math.ceil(low) > math.floor(high):
                raise BadInput(f"tag(int, interval(low, high)) needs an integer in [low, high]; got "
                               f"{key}=interval({value.start}, {value.end}); fix: widen the bounds")
            return IntDistribution(math.ceil(low), math.floor(high), log=log)
        return FloatDistribution(low, high, log=log)
    raise BadInput(f"{key} is not a sweep (choice, range, interval); got {override.input_line}; fix: use choice(...)")


def _categorical_value(x: Any) -> Any:
    if isinstance(x, _PRIMITIVE):
        return x
    return Transformer.encode(x)  # lists/dicts become override text, used verbatim


def build_space(params: Mapping[str, Any] | None, arguments: Sequence[str]) -> Space:
    """Merge `params` from the config with the command line; the command line wins."""
    lines = list(_param_lines(params or {}))
    merged: dict[str, Override] = {o.get_key_element(): o for o in parse_overrides(lines)}
    fixed: list[str] = []
    for override in parse_overrides(arguments):
        key = override.get_key_element()
        if override.is_sweep_override():
            merged[key] = override
        else:
            merged.pop(key, None)
            fixed.append(override.input_line)
    distributions = {
        key: distribution_from_override(o) for key, o in merged.items() if o.is_sweep_override()
    }
    fixed = [o.input_line for o in merged.values() if not o.is_sweep_override()] + fixed
    if not distributions:
        raise BadInput("the search space must vary at least one knob; got no choice/range/interval in "
                       "hydra.sweeper.params or the command line; fix: e.g. batch_size=choice(32,64)")
    return Space(distributions=distributions, fixed_overrides=fixed)


def covers(declared: str, key: str) -> bool:
    """A declared knob names `key` itself or a section holding it (`loader` covers `loader.num_workers`)."""
    return key == declared or key.startswith(f"{declared}.")


def keep_applied(space: Space, applied: Sequence[str] | None, who: str,
                 known: Iterable[str] | None = None) -> tuple[Space, str | None]:
    """The space less the swept knobs an objective says it does not apply, and the one line that says
    so (None when nothing is dropped). `applied` lists dotted keys or sections (`batch_size`,
    `loader`); None means the objective declares nothing and keeps the whole space. `known` (the
    composed trial config's keys) catches a declared name that is no knob. `who` names the objective
    in the messages (`objective.callable myproj.train:objective`)."""
    if applied is None:
        return space, None
    if known is not None:
        known = list(known)
        unknown = [d for d in applied if not any(covers(d, k) for k in known)]
        if unknown:
            raise BadInput(f"{who} must declare knobs of the trial config; got {', '.join(map(repr, unknown))}, "
                           f"which it has none of; fix: name keys such as 'batch_size' or 'loader.num_workers', "
                           f"or sections such as 'loader'")
    kept = {k: d for k, d in space.distributions.items() if any(covers(a, k) for a in applied)}
    dropped = [k for k in space.distributions if k not in kept]
    if not kept:
        raise BadInput(f"the search space must vary a knob {who} applies; got {', '.join(space.distributions)}, and "
                       f"it applies only {', '.join(applied) or 'none'}; fix: sweep one of those (e.g. "
                       f"'{applied[0] if applied else 'batch_size'}=choice(...)') or declare the knobs it applies")
    if not dropped:
        return space, None
    line = (f"not searched: {', '.join(dropped)}: {who} applies only {', '.join(applied)}")
    return replace(space, distributions=kept), line


def _param_lines(params: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """`key=value` lines, as the old Optuna sweeper plugin read its params. A nested
    mapping is flattened to dotted keys: OmegaConf nests `hydra.sweeper.params.optim.lr=...`
    from the command line as params.optim.lr, which means the knob `optim.lr`."""
    for key, value in params.items():
        if isinstance(value, Mapping):
            yield from _param_lines(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}={value}"


def to_override(key: str, value: Any) -> str:
    """One Hydra override line for a sampled value."""
    if isinstance(value, bool) or value is None:
        text = {True: "true", False: "false", None: "null"}[value]
    elif isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, str) and (_BARE_STRING.fullmatch(value) or value[:1] in "[{'\""):
        text = value
    else:
        text = "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"{key}={text}"


def grid_values(distributions: Mapping[str, BaseDistribution]) -> dict[str, list[Any]]:
    """Every value of every knob, for Optuna's GridSampler (needs discrete knobs)."""
    grid: dict[str, list[Any]] = {}
    for key, dist in distributions.items():
        if isinstance(dist, CategoricalDistribution):
            grid[key] = list(dist.choices)
        elif isinstance(dist, IntDistribution) and not dist.log:
            grid[key] = list(range(dist.low, dist.high + 1, dist.step))
        elif isinstance(dist, FloatDistribution) and dist.step is not None:
            n = int(round((dist.high - dist.low) / dist.step)) + 1
            grid[key] = [dist.low + i * dist.step for i in range(n)]
        else:
            raise BadInput(f"the grid sampler needs discrete knobs (choice or range); got {key} as {dist}; "
                           f"fix: use choice(...) or range(...) or another sampler")
    return grid

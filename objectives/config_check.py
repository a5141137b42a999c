"""The strict checks every config section shares: type from the default, then a rule.

Kept apart from the sections themselves so the knob sections (config.py) and
the per-workload objective sections (objective_config.py) validate the same
way and word their one-line errors the same way: rule, value, fix.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

Rule = tuple[str, Callable[[Any], bool], Any]  # (rule text, check, suggested fix value)


class ConfigError(ValueError):
    """A config value a trial cannot run; the message is one line: rule, value, fix."""


class CombinationError(ConfigError):
    """A rule that ties fields together is broken; ``fields`` names them (dotted paths).

    The sweep uses the names to tell a swept value that clashes with a fixed
    one (it leaves the space before the sweep) from one that clashes only with
    another swept value (the sampler never proposes the pair).
    """

    def __init__(self, message: str, fields: tuple[str, ...] = ()):
        super().__init__(message)
        self.fields = fields

    def __reduce__(self):  # type: ignore[override]
        return (type(self), (str(self), self.fields))


class HardwareError(ConfigError):
    """A value this machine cannot run; ``fields`` names the keys the check read (dotted paths).

    Raised by a knob's ``check_hardware`` from the facts in objectives/hardware.py,
    the same check in the sweep (values leave the space) and in the trial
    (the trial ends ``infeasible``).
    """

    def __init__(self, message: str, fields: tuple[str, ...] = ()):
        super().__init__(message)
        self.fields = fields

    def __reduce__(self):  # type: ignore[override]
        return (type(self), (str(self), self.fields))


def fail(path: str, rule: str, value: Any, fix: Any) -> ConfigError:
    return ConfigError(f"{path} must be {rule}; got {value!r}; fix: {path}={fix}")


def _numeric_text(value: Any, kind: type) -> bool:
    if not isinstance(value, str):
        return False
    try:
        kind(value)
    except ValueError:
        return False
    return True


def fail_text(path: str, rule: str, value: str) -> ConfigError:
    """A number written as text, as `${oc.env:VAR}` resolves (Hydra's override grammar refuses the nested
    `${oc.decode:...}` that would read it as a number): the fix for the command line and for a YAML config."""
    return ConfigError(f"{path} must be {rule}; got {value!r}, text (as ${{oc.env:VAR}} gives); fix: {path}=$VAR on "
                       f"the command line (the shell expands it), or ${{oc.decode:${{oc.env:VAR}}}} in a YAML config")


def coerce(path: str, value: Any, default: Any, fix: Any, kind: type | None = None) -> Any:
    """Check the value's type against the default's (or ``kind`` when the default is None).

    Bools are never numbers; None is accepted only where the default is None.
    """
    if default is None:
        if value is None:
            return None
        default = {int: 0, float: 0.0, str: "", bool: False, dict: {}, list: [""]}[kind] if kind else value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise fail(path, "a bool (true or false)", value, str(default).lower())
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail_text(path, "an int", value) if _numeric_text(value, int) else fail(path, "an int", value, fix)
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail_text(path, "a number", value) if _numeric_text(value, float) else fail(path, "a number", value,
                                                                                              fix)
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise fail(path, "a string", value, fix)
        return value
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise fail(path, "a mapping", value, fix)
        return dict(value)
    if isinstance(default, list):  # of ints, or of strings when the default's first item is one
        item = type(default[0]) if default else int
        if not isinstance(value, (list, tuple)) or any(isinstance(v, bool) or not isinstance(v, item) for v in value):
            raise fail(path, f"a list of {'strings' if item is str else 'ints'}", value, fix)
        return list(value)
    raise AssertionError(f"no type rule for {path}")


def checked(path: str, value: Any, default: Any, rules: dict[str, Rule], kind: type | None = None) -> Any:
    fix = rules.get(path, (None, None, default))[2]
    value = coerce(path, value, default, fix, kind)
    if path in rules and value is not None:
        rule, ok, fix = rules[path]
        if not ok(value):
            raise fail(path, rule, value, fix)
    return value


def parse_section(name: str, cls: type, raw: Any, rules: dict[str, Rule], what: str = "") -> Any:
    """One section from its mapping: unknown keys rejected (they are almost always typos)."""
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise ConfigError(f"{name} must be a mapping; got {raw!r}; fix: remove {name} to use its defaults")
    defaults = cls()
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in raw if k not in fields)
    if unknown:
        raise ConfigError(
            f"{name}{what} has unknown key {unknown[0]!r}; valid keys are {', '.join(fields)}; "
            f"fix: remove {name}.{unknown[0]} or use one of the valid keys"
        )
    values = {
        k: checked(f"{name}.{k}", v, getattr(defaults, k), rules, fields[k].metadata.get("kind"))
        for k, v in raw.items()
    }
    return cls(**values)

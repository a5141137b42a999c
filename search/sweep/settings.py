"""The numeric settings of the sweeper and of the trial: one table of rules.

A negative `trial.timeout_s` or a `max_failure_rate` of -1 is no sweep at
all: every trial would time out, or the first failure would give up. Each
setting has one rule here (type and range) and every error is one line
naming the setting, the value, the rule and the fix. They are checked on
the command line's own values before Hydra merges them (where a wrong type
would read as a merge error), and on the composed config before any study,
run or directory exists.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf

from search.errors import BadInput
from search.sweep.recovery import HEARTBEAT_INTERVAL_S

Check = Callable[[Any], bool]


def _int(low: int, high: int | None = None) -> Check:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low and (high is None or v <= high)


def _number(within: Check) -> Check:
    return lambda v: (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                      and within(v))


def _or_null(check: Check) -> Check:
    return lambda v: v is None or check(v)


_STALE_MIN_S = 2 * HEARTBEAT_INTERVAL_S  # a live worker on another host refreshes its heartbeat this often

# dotted path -> (rule, check, the value the fix suggests)
RULES: dict[str, tuple[str, Check, Any]] = {
    "hydra.sweeper.n_trials": ("an int >= 1", _int(1), 20),
    "hydra.sweeper.n_jobs": ("an int >= 1", _int(1), 1),
    "hydra.sweeper.seed": ("null or an int in [0, 2**32 - 1]", _or_null(_int(0, 2**32 - 1)), 0),
    "hydra.sweeper.slots": ("auto or an int >= 1", lambda v: v == "auto" or _int(1)(v), "auto"),
    "hydra.sweeper.trials_per_gpu": ("an int >= 1", _int(1), 1),
    "hydra.sweeper.max_retries": ("an int >= 0", _int(0), 1),
    "hydra.sweeper.stale_after_s": (f"a number of seconds >= {_STALE_MIN_S:g} (twice the heartbeat interval, "
                                    f"or live trials of other hosts read as stale)",
                                    _number(lambda v: v >= _STALE_MIN_S), 120),
    "hydra.sweeper.max_failure_rate": ("a number in [0, 1]", _number(lambda v: 0 <= v <= 1), 0.5),
    "hydra.sweeper.failure_min_trials": ("an int >= 1", _int(1), 4),
    "hydra.sweeper.early_stopping_margin": ("a number in [0, 1)", _number(lambda v: 0 <= v < 1), 0.1),
    "hydra.sweeper.early_stopping_startup_trials": ("an int >= 0", _int(0), 5),
    # an absolute drop, not a share of your accuracy: 0.99 ("keep 99%") would accept a configuration
    # 99 percentage points worse, a negative floor that every trial meets
    "hydra.sweeper.accuracy_tolerance": ("an absolute drop in val_accuracy in [0, 0.5) (0.01 = one percentage "
                                         "point below your configuration's; not a share of it)",
                                         _number(lambda v: 0 <= v < 0.5), 0.005),
    "hydra.sweeper.baseline_repeats": ("an int >= 0 (0: no baseline; 2 or more to know its noise)", _int(0), 2),
    "hydra.sweeper.confirm_budget": ("a fraction of the search trials' time in [0, 1]",
                                     _number(lambda v: 0 <= v <= 1), 0.15),
    "hydra.sweeper.confirm_candidates": ("an int >= 1", _int(1), 3),
    "hydra.sweeper.confirm_undecided_rounds": ("an int >= 0 (0: never over the budget)", _int(0), 2),
    "hydra.sweeper.patience_trials": ("null (every trial of n_trials) or an int >= 1", _or_null(_int(1)), 3),
    "hydra.sweeper.search_for": ("answer or front", lambda v: v in ("answer", "front"), "answer"),
    "hydra.sweeper.start_design": ("one_knob_at_a_time or sampler",
                                   lambda v: v in ("one_knob_at_a_time", "sampler"), "one_knob_at_a_time"),
    "hydra.sweeper.nightly.repeats": ("an int >= 2 (the regression test needs two measurements)", _int(2), 5),
    "hydra.sweeper.nightly.warm_start": ("an int >= 0", _int(0), 3),
    "hydra.sweeper.nightly.alpha": ("a number in (0, 1)", _number(lambda v: 0 < v < 1), 0.01),
    "hydra.sweeper.nightly.min_drop": ("a number in [0, 1)", _number(lambda v: 0 <= v < 1), 0.05),
    "hydra.sweeper.nightly.max_wall_s": ("null or a number of seconds > 0", _or_null(_number(lambda v: v > 0)), 3600),
    "trial.timeout_s": ("a number of seconds > 0", _number(lambda v: v > 0), 600),
    "trial.compile_timeout_s": ("a number of seconds >= 0", _number(lambda v: v >= 0), 1800),
    "trial.max_memory_bytes": ("null or an int > 0 (bytes)", _or_null(_int(1)), "null"),
    "trial.optuna_trial_number": ("null or an int >= 0", _or_null(_int(0)), "null"),
}


def check_setting(path: str, value: Any) -> None:
    rule, ok, fix = RULES[path]
    if isinstance(value, float) and value.is_integer() and ok(int(value)):
        fix = int(value)  # 4e9 where an int is wanted
    if not ok(value):
        raise BadInput(f"{path} must be {rule}; got {value!r}; fix: {path}={fix}")


def check_section(prefix: str, section: Mapping[str, Any] | None) -> None:
    """Every rule under `prefix` ("hydra.sweeper", "trial") whose setting the section holds."""
    for path in RULES:
        if not path.startswith(prefix + "."):
            continue
        node: Any = section
        for part in path[len(prefix) + 1:].split("."):
            node = node.get(part, _ABSENT) if isinstance(node, Mapping) else _ABSENT
        if node is not _ABSENT:
            check_setting(path, node)


def check_config(cfg: DictConfig, prefix: str) -> None:
    """As check_section, on a composed config: each setting resolved on its own."""
    for path in RULES:
        if path.startswith(prefix + "."):
            value = OmegaConf.select(cfg, path, default=_ABSENT)
            if value is not _ABSENT:
                check_setting(path, value)


def checked_trial(cfg: dict[str, Any]) -> dict[str, Any]:
    """A composed trial config, its trial section checked."""
    check_section("trial", cfg.get("trial"))
    return cfg


def check_overrides(overrides: Sequence[Override]) -> None:
    """The command line's values, before Hydra merges them into typed fields."""
    for override in overrides:
        key = override.key_or_group
        if key in RULES and not override.is_sweep_override() and not override.is_delete():
            check_setting(key, override.value())


_ABSENT = object()

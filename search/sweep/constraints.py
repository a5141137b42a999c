"""Constraints on trial metrics, told to Optuna as one list (search/sweep/outcome.py set_constraints).

A rule is `metric >= bound` or `metric <= bound`; Optuna calls a trial
feasible when every constraint value is <= 0, so `x >= t` is told as `t - x`
and `x <= t` as `x - t`. Infeasible trials never appear as best and the
samplers learn to avoid their region.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from search.errors import BadInput
from search.reports.labels import fmt

_RULE = re.compile(r"^\s*(?P<metric>[A-Za-z_][\w.]*)\s*(?P<op>>=|<=)\s*(?P<bound>[-+0-9.eE]+)\s*$")
MISSING_METRIC_VIOLATION = 1.0


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    bound: float

    def violation(self, metrics: Mapping[str, Any]) -> float:
        """<= 0 when satisfied; a trial that did not report the metric violates it."""
        value = metrics.get(self.metric)
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return MISSING_METRIC_VIOLATION
        return self.bound - value if self.op == ">=" else value - self.bound

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g}"


def broken_text(rules: Sequence[Constraint], metrics: Mapping[str, Any]) -> str:
    """The rules `metrics` break, each with the value got as the terminal shows figures ("val_accuracy >= 0.93
    (got 0.8329)"): a trial's line and MLflow tags, the answer's baseline_breaks; '' when none."""
    return ", ".join(f"{r} (got {fmt(metrics[r.metric]) if r.metric in metrics else 'none'})"
                     for r in rules if r.violation(metrics) > 0)


def parse_constraints(rules: Sequence[str] | None) -> list[Constraint]:
    parsed = []
    for rule in rules or []:
        match = _RULE.match(str(rule))
        try:
            bound = float(match["bound"]) if match else math.nan
        except ValueError:
            bound = math.nan
        if not match or not math.isfinite(bound):
            raise BadInput(f"a constraint must read 'metric >= number' or 'metric <= number'; got {rule!r}; "
                           f"fix: hydra.sweeper.constraints=['val_accuracy >= 0.97']")
        parsed.append(Constraint(match["metric"], match["op"], bound))
    return parsed

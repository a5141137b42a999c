"""When a sweep gives up instead of burning the night on a broken setup.

Only failures of the machinery count: `crashed` and `timeout`. A trial
that diverged, ran out of memory or asked for what the hardware cannot do
is data about that configuration, and the sweep goes on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

FAILURES = ("crashed", "timeout")


@dataclass(frozen=True)
class FailurePolicy:
    max_failure_rate: float = 0.5  # give up when more than this fraction of this invocation's trials failed...
    min_trials: int = 4  # ...once at least this many have run, so isolated failures never stop a sweep

    def failure_rate(self, outcomes: Sequence[str]) -> float:
        return sum(o in FAILURES for o in outcomes) / len(outcomes) if outcomes else 0.0

    def gives_up(self, outcomes: Sequence[str]) -> bool:
        return len(outcomes) >= self.min_trials and self.failure_rate(outcomes) > self.max_failure_rate

    def describe(self, outcomes: Sequence[str]) -> str:
        failed = sum(o in FAILURES for o in outcomes)
        return (f"{failed} of {len(outcomes)} trials crashed or timed out ({self.failure_rate(outcomes):.0%}), above "
                f"hydra.sweeper.max_failure_rate={self.max_failure_rate:g}; the trials' reasons are in MLflow and "
                f"the Optuna study")

"""Typed reads of what a trial carries (search/record/keys.py), for `optuna.trial.FrozenTrial` and, where only
user attributes are read, a live `optuna.Trial`. Each returns what the stored value is, never a default that
hides a missing one, but where its docstring says so.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from search.record.answer import ACCURACY, THROUGHPUT
from search.record.keys import (CONSTRAINTS_ATTR, ENDED_ATTR, LAUNCHED_ATTR, METRICS_ATTR, MOVES, OUTCOME_ATTR,
                                REASON_ATTR, ROLE_ATTR, SEED_ATTR)

if TYPE_CHECKING:  # annotations only: reading a trial needs no import of Optuna
    import optuna
    from optuna.trial import FrozenTrial

    AnyTrial = FrozenTrial | optuna.Trial  # both carry `user_attrs`


def outcome(trial: AnyTrial, unrecorded: str = "") -> str:
    """How the trial ended (search/record/outcomes.py); `unrecorded` for one no sweep closed yet (running,
    waiting, or told by hand)."""
    return trial.user_attrs.get(OUTCOME_ATTR, unrecorded)


def reason(trial: AnyTrial) -> str:
    """Why it ended so, one line; '' when ok or not recorded."""
    return str(trial.user_attrs.get(REASON_ATTR, ""))


def metrics(trial: AnyTrial) -> dict[str, float]:
    """Metric name -> value as the trial reported them; {} before it reported any."""
    return trial.user_attrs.get(METRICS_ATTR) or {}


def throughput(trial: AnyTrial) -> float | None:
    """Its training samples/s (answer.THROUGHPUT); None when it reported none."""
    return metrics(trial).get(THROUGHPUT)


def accuracy(trial: AnyTrial) -> float | None:
    """Its own validation accuracy (answer.ACCURACY); None when it reported none (a timed-only trial's is its
    maths' run's: search/sweep/staging.py)."""
    return metrics(trial).get(ACCURACY)


def role(trial: AnyTrial) -> str | None:
    """What an enqueued trial is for (keys.BASELINE, CONFIRM, SEED_CHECK); None for a search trial."""
    return trial.user_attrs.get(ROLE_ATTR)


def seed(trial: AnyTrial) -> int | None:
    """The train.seed it trains at when not the study's; None at the study's seed."""
    return trial.user_attrs.get(SEED_ATTR)


def move_of(trial: AnyTrial) -> tuple[str, Any] | None:
    """(the key it was enqueued under: keys.START_ATTR, HALFWAY_ATTR or COMBINED_ATTR, its value: the knob or
    knobs moved) of a trial the start design enqueued; None for any other."""
    return next(((k, trial.user_attrs[k]) for k in MOVES if k in trial.user_attrs), None)


def launched_unix_s(trial: AnyTrial) -> float | None:
    """When its job was launched, Unix seconds; None before (or for a trial from before it was recorded)."""
    return trial.user_attrs.get(LAUNCHED_ATTR)


def ended_unix_s(trial: AnyTrial) -> float | None:
    """When its job returned, Unix seconds; None before (or for a trial from before it was recorded)."""
    return trial.user_attrs.get(ENDED_ATTR)


def named_constraints(trial: FrozenTrial) -> dict[str, float]:
    """Constraint name -> value, for trials written either way (search/sweep/outcome.py)."""
    named = trial.user_attrs.get(CONSTRAINTS_ATTR)
    return dict(named) if isinstance(named, dict) else dict(trial.constraints)


def is_feasible(trial: FrozenTrial) -> bool:
    """Optuna's feasible: every constraint it was told is met (<= 0); a trial told none is."""
    return all(v <= 0.0 for v in trial.constraints.values())

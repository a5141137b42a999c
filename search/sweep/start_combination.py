"""After the start design: the moves that paid, combined one at a time, as an engineer would by hand.

The start design (search/sweep/start_design.py) measures each knob moved alone from your configuration. The
moves that were faster than your configuration and kept its accuracy (at least the floor: its accuracy less
`hydra.sweeper.accuracy_tolerance`) are then combined greedily, fastest first: the fastest move, plus the
next one; kept when that was faster still at the floor, dropped otherwise; then the next one, and so on. A
combination is one trial, proposed before the sampler's, and the GP learns from it like from any trial. Two
moves that each pay may not pay together (loader workers and intra-op threads on two cores: each faster
alone, slower together), which is why each is added on its own and kept only when it pays.

Stateless: the next combination is read from the study's trials each time (a resumed or killed sweep goes on
where the study is), keyed by the configuration, so a combination that ran before, or a start move that is one,
is not run again; one that is waiting or running holds the next until it ended. A combination stopped early,
failed or infeasible did not pay.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from search.reports.choose import key
from search.sweep.outcome import STOPPED_EARLY
from search.sweep.roles import ROLE_ATTR, SEED_ATTR
from search.sweep.start_design import COMBINED_ATTR, START_ATTR

THROUGHPUT, PROBE, ACCURACY = "throughput_samples_per_s", "probe_throughput_samples_per_s", "val_accuracy"


def _measured(trial: FrozenTrial) -> tuple[float, float | None] | None:
    """A trial's throughput and accuracy when it ran ok (a timed-only trial's accuracy is its maths' run's), or
    its probe's throughput and no accuracy when early stopping ended it (faster than your configuration, slower
    than the best so far); None otherwise."""
    metrics = trial.user_attrs.get("metrics") or {}
    if trial.state != TrialState.COMPLETE:
        return None
    if trial.user_attrs.get("outcome") == "ok" and THROUGHPUT in metrics:
        return metrics[THROUGHPUT], metrics.get(ACCURACY)
    if trial.user_attrs.get("outcome") == STOPPED_EARLY and (PROBE in metrics or THROUGHPUT in metrics):
        return metrics.get(PROBE, metrics.get(THROUGHPUT)), None
    return None


def next_combination(trials: Sequence[FrozenTrial], floor: float | None,
                     forbids: Callable[[Mapping[str, Any]], Any] | None = None) -> tuple[list[str], dict] | None:
    """(the knobs it moves, the configuration) of the next combination to run, or None: none left, fewer than
    two moves paid, a start move or a combination not ended yet, or the floor not known yet."""
    if floor is None or any(t.state in (TrialState.WAITING, TrialState.RUNNING)
                            and (START_ATTR in t.user_attrs or COMBINED_ATTR in t.user_attrs) for t in trials):
        return None
    base = [m[0] for t in trials if t.user_attrs.get(ROLE_ATTR) == "baseline" and SEED_ATTR not in t.user_attrs
            and (m := _measured(t)) is not None and m[1] is not None]
    if not base:
        return None
    baseline_speed = statistics.median(base)
    # A move stopped early had its probe faster than your configuration's run and its accuracy unknown: the
    # combination trains in full and measures it.
    paid = sorted(((m[0], t.user_attrs[START_ATTR], t.params) for t in trials
                   if START_ATTR in t.user_attrs and (m := _measured(t)) is not None
                   and m[0] > baseline_speed and (m[1] is None or m[1] >= floor)), key=lambda p: -p[0])
    if len(paid) < 2:
        return None
    ran: dict[tuple, list[FrozenTrial]] = {}
    for t in trials:
        if t.params:
            ran.setdefault(key(t.params), []).append(t)
    speed, knob, current = paid[0]
    knobs = [knob]
    for _, knob, params in paid[1:]:
        candidate = {**current, knob: params[knob]}
        if forbids is not None and forbids(candidate) is not None:
            continue
        runs = ran.get(key(candidate))
        if not runs:
            return knobs + [knob], candidate
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in runs):
            return None  # another worker runs it: the next step waits for its result
        paying = [m[0] for t in runs if (m := _measured(t)) is not None and m[1] is not None and m[1] >= floor]
        if paying and max(paying) > speed:
            speed, current, knobs = max(paying), candidate, knobs + [knob]
    return None


def enqueue_next(study: optuna.Study, floor: float | None,
                 forbids: Callable[[Mapping[str, Any]], Any] | None = None) -> str | None:
    """Enqueue the next combination (next_combination) when nothing else waits to run, so that it is the very
    next proposal (one left waiting when the search ends would be set aside at the confirmation, and run as a
    trial of the next sweep); the line that says so, or None."""
    trials = study.get_trials(deepcopy=False)
    if any(t.state == TrialState.WAITING for t in trials) or (step := next_combination(trials, floor, forbids)) is None:
        return None
    knobs, params = step
    study.enqueue_trial(params, user_attrs={COMBINED_ATTR: ",".join(knobs)}, skip_if_exists=False)
    return (f"start: the moves that paid, combined: {', '.join(f'{k}={params[k]}' for k in knobs)} "
            f"(hydra.sweeper.start_combination=false leaves it to the sampler)")

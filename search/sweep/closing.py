"""Closing a trial: its result scored and told to Optuna, its MLflow run
ended, one progress line (and, searching for the answer, the status line's
best trial so far); and a trial the sweep stops without a result
(SIGINT, SIGTERM: search/sweep/interrupt.py) closed as failed and enqueued
again, since it measured nothing about its configuration."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from search.errors import BadInput, Interrupted, exit_bad_input
from search.record import (ACCURACY_FROM_ATTR, BASELINE, CONFIRM, CONFIRMATION_ROLES, CONSTRAINTS_ATTR, HEARTBEAT_ATTR,
                           NIGHTLY_INCUMBENT, NIGHTLY_ROLE_ATTR, NIGHTLY_STANDING, NIGHTLY_TESTED, NIGHTLY_TOP_UP,
                           NIGHTLY_WARM_START, OK, RETRIES_ATTR, RETRY_OF_ATTR, ROLE_ATTR, ROUND_ATTR, RUNNABLE,
                           SEED_ATTR, SEED_CHECK, STOPPED_BY_ATTR, metrics)
from search.reports.labels import WARNINGS
from search.sweep.constraints import broken_text
from search.sweep.baseline import accuracy_floor
from search.sweep.early_stopping import fastest_at_floor, intermediate_series
from search.sweep.failure_policy import FAILURES
from search.sweep.metric_names import ended_ok, unreported
from search.sweep.outcome import Scored
from search.sweep.recovery import retry
from search.sweep.staging import logged_metrics
from search.tracking import mlflow_runs as tracking

if TYPE_CHECKING:
    from search.sweep.trial_loop import SweepRun


def close_trial(run: SweepRun, trial: optuna.Trial, result: Any) -> str:
    """Tell Optuna and MLflow how the trial ended; its outcome."""
    plan = run.plan
    refusal = None
    if plan.confirm_metrics and ended_ok(result):  # a user's function: its first ok trial shows what it reports
        refusal, plan.confirm_metrics = unreported(result, plan.confirm_metrics), None
    scored = run.engine.tell(trial, result)  # a throughput-only trial carries its maths' accuracy
    series = dict(result.get("series") or {}) if isinstance(result, dict) else {}
    if plan.early_stopping == "pruner":
        series.update(intermediate_series(run.study, trial))
    violated = broken_text(plan.constraints, scored.metrics)
    tracking.end_trial(run.sweep, trial.number, scored.outcome, logged_metrics(scored.metrics, trial.user_attrs),
                       end_tags(scored, trial.user_attrs, violated), series)
    for warning in [scored.info[k] for k in WARNINGS if scored.info.get(k)]:
        if warning not in run.said:  # every trial of the workload says the same: once per sweep
            run.said.add(warning)
            run.progress.console.print(warning, markup=False, highlight=False, soft_wrap=True)
    shown = scored.metrics or dict(zip(run.progress.metric_names, scored.values or []))
    feasible = all(v <= 0 for v in scored.constraints.values())
    if plan.for_answer and (floor := accuracy_floor(run.study, run.settings.accuracy_tolerance)) is not None \
            and (best := fastest_at_floor(run.study.get_trials(deepcopy=False), floor)) is not None:
        run.progress.stand(best.number, metrics(best))  # drawn when finished() redraws
    run.progress.finished(trial.number, scored.outcome, shown, trial.params, plan.directions, scored.reason, feasible,
                          trial_kind(trial.user_attrs), SEED_ATTR not in trial.user_attrs, violated)
    if refusal:  # SystemExit: the sweep's run is ended on the way out
        exit_bad_input(BadInput(f"{refusal}; with other metrics, also a new hydra.sweeper.study_name (study "
                                f"{run.study.study_name!r} now holds this trial, under the metrics it was made with)"))
    if scored.outcome in FAILURES and trial.user_attrs.get(NIGHTLY_ROLE_ATTR) in NIGHTLY_TESTED:
        # Last night's answer crashing tonight is what the night's test reports (its repeats not measured: untested),
        # not a broken machine: counted, 5 repeats against 2 baseline runs gave up every night, and the next night
        # took the same incumbent again. So is a configuration whose regression stands.
        which = "last night's answer" if trial.user_attrs.get(NIGHTLY_ROLE_ATTR) == NIGHTLY_INCUMBENT else \
            "the configuration that regressed"
        return f"{scored.outcome} ({which})"
    return scored.outcome


FEASIBLE_TAG = "search.feasible"  # true: ran ok and met every hydra.sweeper.constraints rule (Optuna's feasible)
VIOLATED_TAG = "search.violated"  # when not feasible: the rules broken, each with the value got
# The constraints Optuna was told, by name: > 0 broken by that much, <= 0 met (the user attribute
# search.constraints, which the MLflow run carries under this name instead)
VIOLATIONS_TAG = "search.constraint_violations"


def end_tags(scored: Scored, attrs: Mapping[str, Any], violated: str) -> dict[str, str]:
    """The tags a trial's MLflow run ends with: its reason and info, its `search.*` attributes (not the
    heartbeat, which is not data), and whether it is feasible; `violated`: constraints.broken_text()."""
    copied = {k: str(v) for k, v in attrs.items() if k.startswith("search.") and k not in (HEARTBEAT_ATTR,
                                                                                              CONSTRAINTS_ATTR)}
    feasible = scored.outcome == OK and all(v <= 0 for v in scored.constraints.values())
    tags = {"search.reason": scored.reason, **{f"search.info.{k}": v for k, v in scored.info.items()}, **copied,
            FEASIBLE_TAG: str(feasible).lower()}
    if not feasible:
        not_run = [] if scored.outcome == OK else [f"{RUNNABLE} (outcome {scored.outcome})"]
        tags[VIOLATED_TAG] = ", ".join([*not_run, *filter(None, [violated])])
    if isinstance(attrs.get(CONSTRAINTS_ATTR), Mapping):
        tags[VIOLATIONS_TAG] = "; ".join(f"{name}: {value:.4g}" for name, value in attrs[CONSTRAINTS_ATTR].items())
    return tags


def run_name(number: int, attrs: Mapping[str, Any]) -> str:
    """The trial's MLflow run name: trial-<number>, then what it was run for when it was not a proposal
    (`trial-0 baseline`, `trial-20 confirm r1 timed`, `trial-24 seed check seed 1`)."""
    role = attrs.get(ROLE_ATTR)
    parts = {BASELINE: ["baseline"], SEED_CHECK: ["seed check"],
             CONFIRM: [f"confirm r{attrs.get(ROUND_ATTR, '')}"]}.get(role, [])
    parts += {NIGHTLY_INCUMBENT: ["incumbent"], NIGHTLY_STANDING: ["regressed"], NIGHTLY_WARM_START: ["warm start"],
              NIGHTLY_TOP_UP: ["top-up"]}.get(attrs.get(NIGHTLY_ROLE_ATTR), [])
    if SEED_ATTR in attrs:
        parts.append(f"seed {attrs[SEED_ATTR]}")
    if RETRY_OF_ATTR in attrs:
        parts.append(f"retry of {attrs[RETRY_OF_ATTR]}")
    if ACCURACY_FROM_ATTR in attrs:
        parts.append("timed")
    return " ".join([f"trial-{number}", *parts])


def trial_kind(attrs: dict[str, Any]) -> str:
    """What a trial was run for, in words, when it was not an ordinary proposal; '' when it was."""
    role = attrs.get(ROLE_ATTR)
    parts = {BASELINE: ["baseline"], SEED_CHECK: ["second-seed check"],
             CONFIRM: [f"confirmation round {attrs.get(ROUND_ATTR, '')}"]}.get(role, [])  # 1, 2, ... as stored
    nightly = attrs.get(NIGHTLY_ROLE_ATTR)  # nightly's repeats: last night's answer, earlier nights', tonight's
    parts += {NIGHTLY_INCUMBENT: ["last night's answer again"],
              NIGHTLY_STANDING: ["the configuration that regressed, again"],
              NIGHTLY_WARM_START: ["an earlier night's"],
              NIGHTLY_TOP_UP: ["tonight's answer, a whole run"]}.get(nightly, [])
    if SEED_ATTR in attrs:
        parts.append(f"seed {attrs[SEED_ATTR]}")
    if RETRY_OF_ATTR in attrs:
        parts.append(f"retry of trial {attrs[RETRY_OF_ATTR]}")
    if ACCURACY_FROM_ATTR in attrs:
        parts.append(f"timed only, val acc of trial {attrs[ACCURACY_FROM_ATTR]}")
    return ", ".join(parts)


def abort_trial(run: SweepRun, trial: optuna.Trial, err: BaseException) -> None:
    """Close a trial the sweep stops without a result as failed, naming why, and enqueue it again."""
    if isinstance(err, Interrupted):
        why = str(err)
        trial.set_user_attr(STOPPED_BY_ATTR, err.signal_name)
    elif isinstance(err, KeyboardInterrupt):
        why = "interrupted by SIGINT (Ctrl-C)"
        trial.set_user_attr(STOPPED_BY_ATTR, "SIGINT")
    else:
        why = f"stopped by {type(err).__name__}: {err}"
    close_trial(run, trial, {"outcome": "crashed", "reason": f"sweep {why}"})
    run.heartbeat.untrack(trial)
    max_retries = run.settings.max_retries
    retries = int(trial.user_attrs.get(RETRIES_ATTR, 0))
    if retry(run.study, trial, max_retries):
        ahead = len(run.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))) - 1  # oldest run first
        when = f", after the {ahead} trial(s) waiting before it" if ahead > 0 else " first"
        run.progress.console.print(f"trial {trial.number}: enqueued again (retry {retries + 1} of "
                                   f"hydra.sweeper.max_retries={max_retries}): the next sweep on this study runs "
                                   f"it{when}")
    elif trial.user_attrs.get(ROLE_ATTR) in CONFIRMATION_ROLES:  # was: "enqueued again", then dropped unrun
        run.progress.console.print(f"trial {trial.number}: a run of the answer's confirmation, not enqueued again: "
                                   f"the next sweep on this study confirms the answer again")
    else:
        run.progress.console.print(f"trial {trial.number}: not enqueued again: hydra.sweeper.max_retries="
                                   f"{max_retries} and it was retried {retries} time(s)")

"""What a trial is for, as trial attributes (and MLflow tags): search trials carry none.

- `search.trial_role`: `baseline` (the user's own configuration, search/sweep/baseline.py),
  `confirm` (an interleaved re-measurement, search/sweep/confirm.py) or
  `seed_check` (the answer trained again at another seed).
- `search.seed`: a trial that trains at another `train.seed` than the study's (its accuracy
  is compared only with trials at that seed).
- `search.extra_overrides`: overrides a trial runs with on top of its parameters.

Trials enqueued in the sampler's place (`search.replaces`: an unseen configuration instead of a
repeat, search/sweep/no_repeat.py; `search.start_design`: the first proposals,
search/sweep/start_design.py) carry no role: they are measured as proposals are. The keys and the
roles' names are search/record/keys.py's.
"""
from __future__ import annotations

from typing import Any, Callable

import optuna
from optuna.trial import TrialState

from search.record import (BASELINE, CONFIRMATION_ROLES, EXTRA_OVERRIDES_ATTR, NIGHTLY_ROLE_ATTR, NIGHTLY_TESTED,
                           OUTCOME_ATTR, PROPOSALS_ENQUEUED, PUT_BACK_OF_ATTR, REASON_ATTR, ROLE_ATTR, SEED_ATTR,
                           SET_ASIDE_ATTR, SKIPPED, role)


def measured_whatever_the_time(trial: optuna.trial.FrozenTrial) -> bool:
    """Enqueued runs that still run past hooks.max_wall_s (nightly's): your configuration's, which the
    answer is measured against, and the repeats of last night's answer and of a regression that stands,
    tonight's only measurements for the regression tests. Left waiting, a slow night (the one a regression
    makes) would skip its own test."""
    return role(trial) == BASELINE or trial.user_attrs.get(NIGHTLY_ROLE_ATTR) in NIGHTLY_TESTED


def enqueued_params(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    """The parameters a trial was enqueued with (a waiting trial has no `params` yet); {} for a proposal."""
    return dict(study._storage.get_trial_system_attrs(trial._trial_id).get("fixed_params", {}))


def enqueued_as_asked(study: optuna.Study, trial: optuna.Trial) -> bool:
    """Enqueued to be measured as it was asked for (the baseline, a retry, nightly's repeats, a confirmation
    round), not in the sampler's place: early stopping and staging leave it alone."""
    enqueued = "fixed_params" in study._storage.get_trial_system_attrs(trial._trial_id)
    return enqueued and not any(a in trial.user_attrs for a in PROPOSALS_ENQUEUED)


def enqueue(study: optuna.Study, params: dict[str, Any], role_name: str, seed: int | None = None,
            **attrs: Any) -> None:
    """A trial of `params` for `role_name`, at `seed` when given (train.seed=<seed> on top of its parameters)."""
    user_attrs: dict[str, Any] = {ROLE_ATTR: role_name, **attrs}
    if seed is not None:
        user_attrs[SEED_ATTR] = seed
        user_attrs[EXTRA_OVERRIDES_ATTR] = [f"train.seed={seed}"]
    study.enqueue_trial(params, user_attrs=user_attrs, skip_if_exists=False)


def drop_unrun(study: optuna.Study, roles: tuple[str, ...] = CONFIRMATION_ROLES) -> int:
    """Close as failed the re-measurements a stopped sweep enqueued and never ran: they belong to its
    confirmation, and the next sweep must not spend its own trials on them. How many."""
    dropped = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        if role(t) in roles:
            _close_waiting(study, t, "enqueued by a confirmation that was stopped")
            dropped += 1
    return dropped


def _close_waiting(study: optuna.Study, trial: optuna.trial.FrozenTrial, reason: str, **user_attrs: Any) -> None:
    """A waiting trial closed as failed, never run: samplers ignore it, and `reason` says why."""
    for name, value in {**user_attrs, REASON_ATTR: reason}.items():
        study._storage.set_trial_user_attr(trial._trial_id, name, value)
    study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)


Aside = list[tuple[int, dict[str, Any], dict[str, Any]]]  # (trial number, params, user attributes) of each trial


def set_aside_waiting(study: optuna.Study, keep_newest: int = 0,
                      keep: Callable[[optuna.trial.FrozenTrial], bool] = lambda t: False) -> Aside:
    """Close the trials waiting to run (proposals the search's budget did not reach: a retry, a start move
    whose place a retry took; the start moves past n_trials are not enqueued, search/sweep/start_design.py),
    but the `keep_newest` enqueued last and those `keep` says are the caller's own, and return them to
    enqueue again with put_back(). The confirmation (and nightly's top-up) runs its own enqueued trials next,
    and Optuna hands out waiting trials oldest first: it would run these in place of its rounds, and its last
    trial (the second-seed check) would be left waiting, unrun. Each closed trial is marked (`search.set_aside`),
    so a sweep killed before it put them back leaves them to the next one (put_back_stranded)."""
    aside = []
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    for t in [t for t in (waiting[:len(waiting) - keep_newest] if keep_newest else waiting) if not keep(t)]:
        aside.append((t.number, enqueued_params(study, t), dict(t.user_attrs)))  # before _close_waiting writes
        _close_waiting(study, t, "set aside while the answer was confirmed; enqueued again after it",
                       **{OUTCOME_ATTR: SKIPPED, SET_ASIDE_ATTR: True})
    return aside


def put_back(study: optuna.Study, aside: Aside) -> None:
    """Enqueue again what set_aside_waiting() closed, in its order: the next sweep on the study runs it first."""
    for number, params, user_attrs in aside:
        study.enqueue_trial(params, user_attrs={**user_attrs, PUT_BACK_OF_ATTR: number}, skip_if_exists=False)


def put_back_stranded(study: optuna.Study) -> int:
    """Enqueue again the trials a sweep set aside for its confirmation and never put back (it was killed, SIGKILL
    or a lost node, during the confirmation): call only while no live worker confirms. How many."""
    trials = study.get_trials(deepcopy=False)
    done = {t.user_attrs[PUT_BACK_OF_ATTR] for t in trials if PUT_BACK_OF_ATTR in t.user_attrs}
    written = {REASON_ATTR, OUTCOME_ATTR, SET_ASIDE_ATTR}
    stranded = [(t.number, enqueued_params(study, t), {k: v for k, v in t.user_attrs.items() if k not in written})
                for t in trials if t.state == TrialState.FAIL and t.user_attrs.get(SET_ASIDE_ATTR)
                and t.number not in done]
    put_back(study, stranded)
    return len(stranded)

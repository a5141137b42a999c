"""What a trial is for, as trial attributes (and MLflow tags): search trials carry none.

- `search.trial_role`: `baseline` (the user's own configuration, search/sweep/baseline.py),
  `confirm` (an interleaved re-measurement, search/sweep/confirm.py) or
  `seed_check` (the answer trained again at another seed).
- `search.seed`: a trial that trains at another `train.seed` than the study's (its accuracy
  is compared only with trials at that seed).
- `search.extra_overrides`: overrides a trial runs with on top of its parameters.
"""
from __future__ import annotations

from typing import Any

import optuna

ROLE_ATTR = "search.trial_role"  # not "search.role": MLflow runs carry that tag (trial | sweep)
SEED_ATTR = "search.seed"
EXTRA_OVERRIDES_ATTR = "search.extra_overrides"


def role(trial: optuna.trial.FrozenTrial | optuna.Trial) -> str | None:
    return trial.user_attrs.get(ROLE_ATTR)


def enqueue(study: optuna.Study, params: dict[str, Any], role_name: str, seed: int | None = None,
            **attrs: Any) -> None:
    """A trial of `params` for `role_name`, at `seed` when given (train.seed=<seed> on top of its parameters)."""
    user_attrs: dict[str, Any] = {ROLE_ATTR: role_name, **attrs}
    if seed is not None:
        user_attrs[SEED_ATTR] = seed
        user_attrs[EXTRA_OVERRIDES_ATTR] = [f"train.seed={seed}"]
    study.enqueue_trial(params, user_attrs=user_attrs, skip_if_exists=False)

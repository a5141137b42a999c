"""`${search.objective:}`: the objective's label in conf/ names.

conf/nightly.yaml names the night's study, its MLflow experiment and its
series after the objective. `${objective.name}` would name every app of
`objective=custom` `custom`, so two teams' nightlies of two models in one
storage would share a series (each night's incumbent taken from the other
model's night) and a study per date; conf/search/gpu.yaml's study name
likewise. This resolver gives what a multirun's default study name uses
(objectives/objective_config.py `objective_label`): the name, or for
`name: custom` the `_target_` of its model or its callable.
"""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

RESOLVER = "search.objective"


def _label(*, _root_: DictConfig) -> str:
    from objectives.objective_config import objective_label

    objective = _root_.get("objective")
    if not isinstance(objective, DictConfig):
        return "digits"
    raw: Any = OmegaConf.to_container(objective, resolve=True)
    return objective_label(raw)


def register() -> None:
    """Idempotent; `import search` calls it, before any conf/ is composed."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, _label)

"""A tiny ``_target_`` instantiate, so the user's own objective needs no Hydra in the trial.

``{"_target_": "pkg.module.Name", "k": v}`` calls ``pkg.module.Name(k=v)``;
``_args_`` gives positional arguments; nested ``_target_`` mappings (in
values, lists or ``_args_``) are built first, depth first. That is the part
of Hydra's ``instantiate`` a model or dataset spec needs; everything else
(``_partial_``, ``_convert_``, interpolation) is the config system's job and
has already happened by the time a trial runs.
"""

from __future__ import annotations

import importlib
from typing import Any

from objectives.config_check import ConfigError


def locate(path: str, key: str) -> Any:
    """``pkg.module:attr`` or ``pkg.module.attr`` -> the object; ConfigError naming ``key`` if absent."""
    module_name, _, attr = path.rpartition(":") if ":" in path else path.rpartition(".")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(
            f"{key} must name an importable module; got {path!r} ({type(err).__name__}: {err}); "
            f"fix: put {module_name!r} on PYTHONPATH or correct {key}"
        ) from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(
                f"{key} must name an attribute of module {module_name!r}; got {path!r}; "
                f"fix: check the spelling of {attr!r}"
            )
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(
            f"{key} must name a callable; got {path!r} of type {type(obj).__name__}; fix: name a class or function"
        )
    return obj


def check_targets(spec: Any, key: str) -> None:
    """Locate every ``_target_`` of ``spec`` (as instantiate() would, depth first) without building anything:
    the sweep refuses a misspelt one before its first trial, not in every trial."""
    if isinstance(spec, list):
        for i, v in enumerate(spec):
            check_targets(v, f"{key}[{i}]")
    elif isinstance(spec, dict):
        if "_target_" in spec:
            locate(spec["_target_"], f"{key}._target_")
        for k, v in spec.items():
            if k != "_target_":
                check_targets(v, f"{key}.{k}" if k != "_args_" else f"{key}._args_")


def check_objective(objective: Any) -> None:
    """A custom objective's function and every ``_target_`` it names can be found (imported, not called or built):
    a ConfigError naming the key otherwise. The sweep and `python -m search run` call it before any trial; other
    objectives name nothing to find."""
    if getattr(objective, "callable", None) is not None:
        locate(objective.callable, "objective.callable")
    for key in ("model", "train_dataset", "val_dataset", "loss"):
        check_targets(getattr(objective, key, None), f"objective.{key}")


def instantiate(spec: Any, key: str = "_target_") -> Any:
    """Build ``spec`` recursively; anything that is not a ``_target_`` mapping is returned as is."""
    if isinstance(spec, list):
        return [instantiate(v, f"{key}[{i}]") for i, v in enumerate(spec)]
    if not isinstance(spec, dict):
        return spec
    if "_target_" not in spec:
        return {k: instantiate(v, f"{key}.{k}") for k, v in spec.items()}
    unknown = sorted(k for k in spec if k.startswith("_") and k not in ("_target_", "_args_"))
    if unknown:
        raise ConfigError(
            f"{key} supports only _target_ and _args_ among underscore keys; got {unknown[0]!r}; "
            f"fix: remove {key}.{unknown[0]}"
        )
    target = locate(spec["_target_"], f"{key}._target_")
    args = [instantiate(v, f"{key}._args_[{i}]") for i, v in enumerate(spec.get("_args_", []))]
    kwargs = {k: instantiate(v, f"{key}.{k}") for k, v in spec.items() if not k.startswith("_")}
    return target(*args, **kwargs)

"""The fixed configuration a study was made with, recorded on it and checked when it resumes.

A study's trials are comparable only under one fixed configuration: what conf/ and the sweep's fixed
overrides compose, less the space. Staging takes a trial's accuracy from an earlier trial with the same
swept maths (search/sweep/staging.py), the baseline runs once per study (search/sweep/baseline.py), and the
answer compares every trial with it; a re-run of the same command after editing the model, the data or
`train.budget_samples` resumed the study and mixed the old model's figures with the new one's. So the first
sweep of a study records its fixed configuration (study attribute FIXED_ATTR: dotted key -> JSON value), and
a sweep that resumes the study with another one is refused before anything runs (exit 2), naming the keys.

Left out of the record: the space's keys, the `hydra` node, what the sweep sets per trial
(`train.stop_below_samples_per_s`, `train.throughput_only`, the seed checks' `train.seed` is an extra
override, not part of the composed fixed configuration) and the `trial` section (timeouts, the memory cap,
the Optuna trial a trial reports to, the GPUs a slot gives it: how a trial is run and stopped, not what it
measures). Values are recorded unresolved, so that an interpolation of the time or of Hydra's run
directory does not differ between two runs of one command. A user's model, data, loss or function named
by `_target_` or `callable` is recorded with a digest of its module's source file (not of the modules that
file imports), when that file lies outside the installed packages and the standard library.

A study made before this record existed has none: the sweep records its configuration then, and says so.
Workers starting together on a new study: each finds the record missing or equal to its own; the first
to write it makes it.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sysconfig
from pathlib import Path
from typing import Any, Iterable, Mapping

import optuna

from search.errors import BadInput

FIXED_ATTR = "search.fixed_config"
PER_TRIAL = frozenset({"train.stop_below_samples_per_s", "train.throughput_only"})  # set per trial by the sweep
HOW_RUN = ("trial",)  # sections that say how a trial is run and stopped, not what it measures
SOURCE_SUFFIX = ":source"  # `objective.model._target_:source` -> the digest of that target's module file
SHOWN = 4  # changed keys named in the refusal, then "and N more"


def _leaves(cfg: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(cfg, Mapping):
        out: dict[str, Any] = {}
        for key, value in cfg.items():
            out.update(_leaves(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: cfg}


def _excluded(key: str, space_keys: Iterable[str]) -> bool:
    if key in PER_TRIAL or key.split(".", 1)[0] in HOW_RUN:
        return True
    return any(key == s or key.startswith(f"{s}.") for s in space_keys)


def fixed_record(config: Mapping[str, Any], space_keys: Iterable[str]) -> dict[str, str]:
    """Dotted key -> JSON value of the trial config (the `hydra` node left out), less what the sweep varies or
    sets per trial; plus a source digest per user `_target_` or `callable` (see the module's docstring)."""
    space_keys = list(space_keys)
    record = {}
    for key, value in _leaves({k: v for k, v in config.items() if k != "hydra"}).items():
        if _excluded(key, space_keys):
            continue
        record[key] = json.dumps(value, sort_keys=True, default=str)
        if (key.endswith("._target_") or key.endswith(".callable")) and isinstance(value, str) and value:
            digest = source_digest(value)
            if digest is not None:
                record[f"{key}{SOURCE_SUFFIX}"] = digest
    return record


def source_digest(target: str) -> str | None:
    """`sha256:<12 hex>` of the source file of the module that defines `target` ("pkg.mod.Class" or
    "pkg.mod:function"), when it is a user's file (not an installed package's, not the standard library's);
    None otherwise or when it cannot be found."""
    module = target.split(":", 1)[0] if ":" in target else target.rpartition(".")[0]
    path = _module_file(module)
    if path is None or _installed(path):
        return None
    try:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    except OSError:
        return None


def _module_file(module: str) -> Path | None:
    """The module's file, or its parent's when `module` is a class path's container that is itself a class."""
    while module:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError, AttributeError):
            spec = None
        if spec is not None:
            return Path(spec.origin) if spec.origin and spec.has_location else None
        module = module.rpartition(".")[0]
    return None


def _installed(path: Path) -> bool:
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    resolved = path.resolve()
    return any(resolved.is_relative_to(Path(root).resolve()) for root in roots if root)


def changes(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """One entry per key whose value differs: `objective.width 32 -> 8`, a source as `... source changed`."""
    out = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, "(absent)"), new.get(key, "(absent)")
        if before == after:
            continue
        if key.endswith(SOURCE_SUFFIX):
            out.append(f"the source file of {key[:-len(SOURCE_SUFFIX)]} changed")
        else:
            out.append(f"{key} {before} -> {after}")
    return out


def check_fixed(study: optuna.Study, record: Mapping[str, str], resumed: bool) -> str | None:
    """Refuse (BadInput) a resumed study whose recorded fixed configuration differs from `record`; record it on a
    study that has none. A line to print when an older study got its record only now, else None."""
    written = study.user_attrs.get(FIXED_ATTR)
    if isinstance(written, Mapping):
        changed = changes(written, record)
        if changed:
            more = f" and {len(changed) - SHOWN} more" if len(changed) > SHOWN else ""
            raise BadInput(f"a resumed study keeps the fixed settings it was made with (its trials are compared "
                           f"with each other and with its baseline); study {study.study_name!r} got "
                           f"{'; '.join(changed[:SHOWN])}{more}; fix: a new study "
                           f"(hydra.sweeper.study_name=<new name>), the key in the space "
                           f"(hydra.sweeper.params), or the old value")
        return None
    study.set_user_attr(FIXED_ATTR, dict(record))
    if resumed and study.trials:
        return (f"study {study.study_name!r} has no record of its fixed settings (made by an older version): "
                f"recorded now; a later run with other fixed settings is refused")
    return None

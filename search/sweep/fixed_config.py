"""Your configuration as a study was made with it, recorded on the study and checked when it resumes.

A study's trials are comparable only under one configuration of everything the sweep does not vary:
staging takes a trial's accuracy from an earlier trial with the same swept maths (search/sweep/staging.py),
the baseline runs once per study (search/sweep/baseline.py), and the answer compares every trial with it.
A re-run of the same command after editing the model, the data or `train.budget_samples` resumed the study
and mixed the old model's figures with the new one's. So the first sweep of a study records your
configuration on it (study attribute FIXED_ATTR: dotted key -> JSON value), and a sweep that resumes the
study with another one is refused before anything runs (exit 2), naming the keys.

Recorded: what conf/ and the sweep's fixed overrides compose, the space's knobs at their values there (your
configuration, the baseline: its value of a searched knob changed is another baseline). Which knobs the
space searches may change between sweeps: to try another value of a setting, search it with the recorded
value among its choices. Left out: the `hydra` node, what the sweep sets per trial
(`train.stop_below_samples_per_s`, `train.throughput_only`; a seed check's `train.seed` is an extra
override of its trial, not part of your configuration) and the `trial` section (timeouts, the memory cap,
the Optuna trial a trial reports to, the GPUs a slot gives it: how a trial is run and stopped, not what it
measures). Your `hydra.sweeper.constraints` are recorded too, when there are any: every trial's feasibility is
stored as it was scored, under the rules of its sweep, so a resume under other rules would take a trial that
breaks the new ones for one that meets them (seen: the answer `batch_size=128` at val_loss 0.05 under
`val_loss <= 0.01`, from its run under `val_loss <= 0.08`). Values are recorded unresolved, so that an
interpolation of the time or of Hydra's run directory does not differ between two runs of one command. A value
with an environment variable in it (`${oc.env:DATA_DIR}`) is the same text whatever the variable holds, so its
resolved value is recorded too, as a keyed digest (ENV_SUFFIX; the value may be a token): a resume under another
value is refused like any other change. A
user's model, data, loss or function named by `_target_` or `callable` is recorded with a digest of its
module's source file (not of the modules that file imports), when that file lies outside the installed
packages and the standard library (those change with their versions: the fingerprint's warning).

A study made before this record existed has none: the sweep records your configuration then, and says so.
Workers starting together on a new study each find the record missing or equal to their own; the first to
write it makes it (two workers started at once with different configurations may both write: the last wins).
"""
from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import re
import secrets
import sysconfig
from pathlib import Path
from typing import Any, Mapping, Sequence

import optuna
from omegaconf import OmegaConf

from search.errors import BadInput
from search.record import FIXED_ATTR
from search.tracking.mlflow_runs import flatten
from search.tracking.redact import redact

PER_TRIAL = frozenset({"train.stop_below_samples_per_s", "train.throughput_only"})  # set per trial by the sweep
HOW_RUN = ("trial",)  # sections that say how a trial is run and stopped, not what it measures
SOURCE_SUFFIX = ":source"  # `objective.model._target_:source` -> the digest of that target's module file
SAME_FOR_EVERY_TRIAL = "train."  # the measuring protocol (budget, windows): never offered as a knob to search
SHOWN = 4  # changed keys named in the refusal, then "and N more"
CONSTRAINTS_KEY = "hydra.sweeper.constraints"  # the rules the study's trials were scored under, when there are any
ENV_SUFFIX = ":env"  # `objective.data_dir:env` -> a digest of what its `${oc.env:...}` resolves to now
ENV_SALT_KEY = ":env salt"  # the study's random key for those digests (equal values, equal digests; no value kept)
_ENV_INTERPOLATION = re.compile(r"\$\{\s*oc\.env\s*:")


def fixed_record(config: Mapping[str, Any], constraints: Sequence[Any] = ()) -> dict[str, str]:
    """Dotted key -> JSON value of your configuration's trial config (the `hydra` node left out), less what the
    sweep sets per trial and the `trial` section; plus a source digest per user `_target_` or `callable`, and the
    sweep's constraints when there are any (see the module's docstring)."""
    record = {CONSTRAINTS_KEY: json.dumps(sorted(map(str, constraints)))} if constraints else {}
    for key, value in flatten({k: v for k, v in config.items() if k != "hydra"}).items():
        if key in PER_TRIAL or key.split(".", 1)[0] in HOW_RUN:
            continue
        record[key] = redact(json.dumps(value, sort_keys=True, default=str))  # a URL's password is never stored
        if (resolved := _env_resolved(value)) is not None:  # sealed by check_fixed before it is stored
            record[f"{key}{ENV_SUFFIX}"] = resolved
        if (key.endswith("._target_") or key.endswith(".callable")) and isinstance(value, str) and value:
            digest = source_digest(value)
            if digest is not None:
                record[f"{key}{SOURCE_SUFFIX}"] = digest
    return record


def _env_resolved(value: Any) -> str | None:
    """What `value` resolves to now, as JSON, when it interpolates an environment variable and nothing else that
    needs the whole config (a node, Hydra's run); None otherwise, or when it cannot be resolved (the variable unset
    without a default: the trial says so)."""
    text = json.dumps(value, sort_keys=True, default=str)
    if not _ENV_INTERPOLATION.search(text):
        return None
    try:
        resolved = OmegaConf.to_container(OmegaConf.create({"value": value}), resolve=True)["value"]
    except Exception:  # noqa: BLE001 - OmegaConf's resolution errors have no one base class
        return None
    return json.dumps(resolved, sort_keys=True, default=str)


def _sealed(record: Mapping[str, str], salt: str) -> dict[str, str]:
    """`record` with each resolved environment value replaced by its HMAC-SHA256 under the study's `salt`: two
    records compare equal exactly when the values do, and a token in the environment is never stored."""
    out = {k: v for k, v in record.items() if k != ENV_SALT_KEY}
    for key in [k for k in out if k.endswith(ENV_SUFFIX)]:
        out[key] = "hmac-sha256:" + hmac.new(salt.encode(), out[key].encode(), hashlib.sha256).hexdigest()[:16]
    return out


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
    """One entry per key whose value differs: `objective.width 32 -> 8`, a source as `... source file changed`."""
    out = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, "(absent)"), new.get(key, "(absent)")
        if before == after or key == ENV_SALT_KEY or (key.endswith(ENV_SUFFIX) and key not in old):
            continue  # a record made before environment values were recorded: their text is compared only
        if key.endswith(SOURCE_SUFFIX):
            out.append(f"{key[:-len(SOURCE_SUFFIX)]}'s source file changed")
        elif key.endswith(ENV_SUFFIX):
            name = key[:-len(ENV_SUFFIX)]
            out.append(f"{name} {new.get(name, old.get(name))} resolves to another value than when the study was made "
                       f"(an environment variable changed)")
        else:
            out.append(f"{key} {before} -> {after}")
    return out


def _fix(old: Mapping[str, str], new: Mapping[str, str], changed_keys: list[str]) -> str:
    """The way out: the old value, searching the new one beside it (a plain value changed, not one of `train`, the
    same for every trial by design), or a new study."""
    plain = [k for k in changed_keys if k in old and k in new and not k.endswith((SOURCE_SUFFIX, ENV_SUFFIX))
             and not k.startswith(SAME_FOR_EVERY_TRIAL)
             and not old[k].startswith(("[", "{")) and not new[k].startswith(("[", "{"))]
    search = ""
    if plain:
        key = plain[0]
        search = (f" (to compare the two, keep the old one and search both: "
                  f"{key}=choice({_as_override(old[key])},{_as_override(new[key])}))")
    env = " (an environment variable as it was when the study was made)" if any(
        k.endswith(ENV_SUFFIX) for k in changed_keys) else ""
    return f"fix: the old value{env}{search}, or a new study: hydra.sweeper.study_name=<new name>"


def _as_override(recorded: str) -> str:
    try:
        value = json.loads(recorded)
    except ValueError:  # a value redacted inside its JSON stays valid JSON; this is for safety only
        return recorded
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def check_fixed(study: optuna.Study, record: Mapping[str, str], resumed: bool) -> str | None:
    """Refuse (BadInput) a resumed study whose recorded configuration differs from `record`; record it on a study
    that has none. A line to print when an older study got its record only now, else None."""
    written = study.user_attrs.get(FIXED_ATTR)
    salt = written.get(ENV_SALT_KEY) if isinstance(written, Mapping) else None
    salt = salt or secrets.token_hex(16)
    record = _sealed(record, salt)
    if any(k.endswith(ENV_SUFFIX) for k in record):
        record[ENV_SALT_KEY] = salt
    if isinstance(written, Mapping):
        changed = changes(written, record)
        if changed:
            keys = sorted(k for k in set(written) | set(record) if written.get(k) != record.get(k))
            more = f" and {len(changed) - SHOWN} more" if len(changed) > SHOWN else ""
            raise BadInput(f"a resumed study keeps the configuration it was made with (its trials are compared with "
                           f"each other and with it; the knobs it searches may change); study {study.study_name!r} got "
                           f"{'; '.join(changed[:SHOWN])}{more}; {_fix(written, record, keys)}")
        if any(k not in written for k in record):  # made before environment values were recorded: from now on
            study.set_user_attr(FIXED_ATTR, {**written, **record})
        return None
    study.set_user_attr(FIXED_ATTR, dict(record))
    if resumed and study.trials:
        return (f"study {study.study_name!r} has no record of the configuration it was made with (made by an older "
                f"version): recorded now; a later run with another one is refused")
    return None

"""The Hydra task: ONE trial at the configuration Hydra composed.

Runs in the sweep process under Hydra's launcher; the training itself runs
in an isolated child (isolate.py). Returns a plain dict so that any Hydra
launcher (basic, joblib, submitit) can carry it back to the sweeper; under
the sweeper's device slots (slots.py) it returns the running trial instead,
and the sweeper waits for it.

The trial's config is parsed once: by the sweeper when it proposed the
trial (handed over in this process, search/trial/composed_job.py), or here
when nothing handed it (`python -m search run`, another launcher's process).
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from search.trial import slots
from search.trial.composed_job import handed_config
from search.trial.isolate import start_isolated, warm_up
from search.trial.typed_config import parse_trial


def task(cfg: DictConfig) -> Any:
    job_cfg = OmegaConf.to_container(cfg, resolve=True)
    parsed = handed_config() or parse_trial(job_cfg)
    if HydraConfig.get().mode == RunMode.RUN and parsed is not None:
        say_without_effect(parsed, list(HydraConfig.get().overrides.task))
    visible = cfg.trial.get("visible_devices")
    running = start_isolated(job_cfg, timeout_s=float(cfg.trial.timeout_s), report=_reporter(cfg),
                             visible_devices=None if visible is None else str(visible), parsed=parsed)
    if slots.jobs_detached():
        return running
    result = running.wait()
    if HydraConfig.get().mode == RunMode.RUN:
        from search.reports.tables import print_single

        print_single(job_cfg, result)
        exit_unless_ok(result)
    return result


def say_without_effect(parsed: Any, overrides: list[str]) -> None:
    """`python -m search run`: one line for the keys you set that this configuration's other values leave
    without effect (`loader.persistent_workers=true` beside `loader.num_workers=0`): it runs as without them."""
    from objectives.knobs import unused_keys
    from search.sweep.reproduce import override_key

    set_here = {override_key(line): line for line in overrides}
    idle = [set_here[k] for k in sorted(unused_keys(parsed)) if k in set_here and not _is_default(parsed, k)]
    if idle:
        print(f"note: {', '.join(idle)}: without effect beside this configuration's other values (loader workers' "
              f"settings without workers); the trial runs as without {'them' if len(idle) > 1 else 'it'}",
              file=sys.stderr, flush=True)


def _is_default(parsed: Any, key: str) -> bool:
    """Whether `key` (section.field) holds its section's default: export writes every knob of the space, so
    `loader.persistent_workers=false` beside no workers is no setting of yours left without effect."""
    section, _, name = key.partition(".")
    config = getattr(parsed, section, None)
    found = {f.name: f for f in dataclasses.fields(config)} if dataclasses.is_dataclass(config) else {}
    if name not in found or found[name].default is dataclasses.MISSING:
        return False
    return getattr(config, name) == found[name].default


def exit_unless_ok(result: dict) -> None:
    """`python -m search run` in a script: a trial that did not end ok is not a success (exit 6)."""
    if result.get("outcome") == "ok":
        return
    from search.errors import EXIT_TRIAL_NOT_OK

    reason = " ".join(str(result.get("reason") or "no reason given").split())
    print(f"search: the trial ended {result.get('outcome')}, not ok: {reason}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_TRIAL_NOT_OK)


BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


class WarmUp(Callback):
    """conf/config.yaml's Hydra callback: as soon as Hydra has composed a multirun's config, the forkserver
    every trial is forked from starts importing torch (seconds, on another core) while the sweeper imports
    its own modules and opens MLflow and the study; the sweeper waits for it before the first trial. Under
    another launcher the trials run in that launcher's processes, each with its own forkserver: nothing
    starts here."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.launcher.get("_target_") == BASIC_LAUNCHER:
            warm_up()


def _reporter(cfg: DictConfig) -> Any:
    """The trial's link to its Optuna trial, when the sweep asked for one
    (`trial.optuna_trial_number`): storage and pruner come from the sweeper's
    own config, which Hydra hands every job, so no URL is written anywhere."""
    number = cfg.trial.get("optuna_trial_number")
    if number is None or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    from search.sweep.early_stopping import make_pruner
    from search.trial.learning_curve import TrialReporter
    from search.sweep.study import trial_storage

    sweeper = HydraConfig.get().sweeper
    return TrialReporter(trial_storage(sweeper.get("storage")), str(cfg.trial.optuna_study), int(number),
                         make_pruner(sweeper.get("pruner")))

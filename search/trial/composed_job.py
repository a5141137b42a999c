"""One Hydra job at a configuration the sweeper has already composed.

Hydra's basic launcher composes each job's config from its overrides and
then runs it; composing takes about 65 ms on a 2-core machine. The sweeper
composes every trial's config once already (to check it and to log it to
MLflow), so under the basic launcher it hands that same config to Hydra's
own `run_job`, as the launcher would, instead of composing it twice.

The trial's typed config (objectives.TrialConfig), parsed once when the
trial was proposed, is handed to the job the same way: the job runs in this
process, inside `handing(config)`, and takes it from there
(search/trial/app.py) instead of parsing the dict again.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from hydra.core.utils import JobReturn, configure_log, run_job, setup_globals
from omegaconf import DictConfig, open_dict


def run_composed(launcher: Any, job_config: DictConfig, job_idx: int) -> JobReturn:
    """What hydra's BasicLauncher.launch does for one job, minus `load_sweep_config`."""
    setup_globals()
    with open_dict(job_config):
        job_config.hydra.job.id = job_idx
        job_config.hydra.job.num = job_idx
    ret = run_job(hydra_context=launcher.hydra_context, task_function=launcher.task_function, config=job_config,
                  job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    return ret


_handed: Any = None


@contextmanager
def handing(config: Any) -> Iterator[None]:
    """A job launched inside, in this process, runs with `config` (objectives.TrialConfig, or None: parse it)."""
    global _handed
    _handed = config
    try:
        yield
    finally:
        _handed = None


def handed_config() -> Any:
    return _handed

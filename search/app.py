"""The Hydra task: ONE trial at the configuration Hydra composed.

Runs in the sweep process under Hydra's launcher; the training itself runs
in an isolated child (isolate.py). Returns a plain dict so that any Hydra
launcher (basic, joblib, submitit) can carry it back to the sweeper.
"""
from __future__ import annotations

from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from search.isolate import run_isolated


def task(cfg: DictConfig) -> dict[str, Any]:
    job_cfg = OmegaConf.to_container(cfg, resolve=True)
    result = run_isolated(job_cfg, timeout_s=float(cfg.trial.timeout_s))
    if HydraConfig.get().mode == RunMode.RUN:
        from search.report import print_single

        print_single(job_cfg, result)
    return result

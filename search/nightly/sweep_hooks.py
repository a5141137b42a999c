"""The nightly sweep as hooks of the plain one (search/sweep/hooks.py):
`hydra.sweeper.nightly.enabled=true` (conf/nightly.yaml) turns them on."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import optuna
from optuna.distributions import BaseDistribution

from search.nightly import night as nightly
from search.sweep.hooks import NoHooks, SweepHooks


def sweep_hooks(cfg: Mapping[str, Any]) -> SweepHooks:
    """`cfg` is hydra.sweeper.nightly."""
    return NightlyHooks(dict(cfg)) if cfg.get("enabled") else NoHooks()


class NightlyHooks:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.night: nightly.Night | None = None

    def named_metrics(self) -> dict[str, str]:
        return {self.cfg["metric"]: "hydra.sweeper.nightly.metric"} if self.cfg.get("metric") else {}

    def start(self, study: optuna.Study, storage: Any, distributions: Mapping[str, BaseDistribution],
              first: bool = True) -> int:
        self.night = nightly.start(self.cfg, study, storage, distributions, first)
        return self.night.on_top

    def earlier_studies(self) -> list[optuna.Study]:
        return list(self.night.earlier) if self.night else []

    def run_tags(self) -> dict[str, str]:
        return nightly.run_tags(self.night) if self.night else {}

    def max_wall_s(self) -> float | None:
        return self.cfg.get("max_wall_s")

    def top_up(self) -> int:
        return nightly.top_up(self.night) if self.night else 0

    def finish(self, metric_names: Sequence[str], report_dir: Path, parent_run_id: str | None,
               plot_files: list[Path], last: bool = True) -> int:
        if self.night is None:
            return 0
        if not last:  # tonight's answer and top-ups are not in yet: a report now would be another, partial one
            print("nightly: the report and the regression test are left to the last worker searching this study "
                  "(its report/nightly.md is tonight's)", flush=True)
            return 0
        return nightly.finish(self.night, list(metric_names), report_dir, parent_run_id, plot_files)

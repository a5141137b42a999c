"""Passwords in storage and tracking URLs never reach logs, params or files."""
from __future__ import annotations

import re
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]*)@")


def redact(text: str) -> str:
    """`postgresql://u:secret@h/db` -> `postgresql://u:***@h/db`, anywhere in `text`."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)


def redact_file(path: Path) -> None:
    text = path.read_text()
    clean = redact(text)
    if clean != text:
        path.write_text(clean)


class RedactSavedConfigs(Callback):
    """Hydra saves each job's config and overrides (and the sweep's
    multirun.yaml) verbatim; a storage URL given on the command line would
    keep its password there. This rewrites those files as each job ends."""

    def on_job_start(self, config: DictConfig, **kwargs: object) -> None:
        self._scrub(config)

    def on_job_end(self, config: DictConfig, job_return: object, **kwargs: object) -> None:
        self._scrub(config)

    def on_multirun_end(self, config: DictConfig, **kwargs: object) -> None:
        self._scrub(config)

    @staticmethod
    def _scrub(config: DictConfig) -> None:
        dirs = []
        if config.hydra.get("runtime") and config.hydra.runtime.get("output_dir"):
            dirs.append(Path(config.hydra.runtime.output_dir) / config.hydra.output_subdir)
        dirs.append(Path(config.hydra.sweep.dir))
        for directory in dirs:
            if directory.is_dir():
                for path in directory.glob("*.yaml"):
                    redact_file(path)

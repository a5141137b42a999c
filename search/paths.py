"""Where conf/ is: inside the installed package (search/conf, shipped by
pyproject's package-dir mapping) or at the root of a checkout."""
from __future__ import annotations

from pathlib import Path


def conf_dir() -> Path:
    installed = Path(__file__).resolve().parent / "conf"
    if (installed / "config.yaml").is_file():
        return installed
    return Path(__file__).resolve().parent.parent / "conf"

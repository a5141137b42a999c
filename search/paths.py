"""Where conf/ is: inside the installed package (search/conf, copied there
by setup.py when a wheel is built) or at the root of a checkout (an editable
install, or the repository on PYTHONPATH)."""
from __future__ import annotations

from pathlib import Path


def conf_dir() -> Path:
    installed = Path(__file__).resolve().parent / "conf"
    if (installed / "config.yaml").is_file():
        return installed
    return Path(__file__).resolve().parent.parent / "conf"

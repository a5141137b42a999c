"""Hydra's composition errors as one line with a fix a user can paste.

Hydra says `Could not override 'batch_sise'` and, for a config group,
lists the available options over several lines; the one-line bad-input
message (search/errors.py) keeps its first line only. This adds the part
that fixes it: the config key closest to a misspelt one, or the group's
options.
"""
from __future__ import annotations

import difflib
import re
from typing import Any, Iterable

_OPTIONS = re.compile(r"Available options in '(?P<group>[^']+)':\n(?P<names>(?:\t[^\n]*\n?)+)")
_OVERRIDE = re.compile(r"Could not override '(?P<key>[^']+)'")


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return " ".join(text.splitlines()[0].split()) if text else type(err).__name__


def fix_for(err: BaseException, keys: Iterable[str]) -> str | None:
    """`group=<a|b>` for a missing config group option; `did you mean k?` for a misspelt key of
    `keys` (the composed config's dotted keys); None when neither applies."""
    text = str(err)
    options = _OPTIONS.search(text)
    if options:
        names = [n.strip() for n in options["names"].splitlines() if n.strip()]
        return f"{options['group']}=<{'|'.join(names)}>"
    missing = _OVERRIDE.search(text)
    if missing:
        close = difflib.get_close_matches(missing["key"], list(keys), n=1, cutoff=0.75)
        if close:
            return f"did you mean {close[0]}?"
    return None


def dotted_keys(cfg: Any, prefix: str = "") -> list[str]:
    """Every dotted key of a config (a DictConfig or a dict), the `hydra` node left out."""
    out: list[str] = []
    for key in cfg:
        if not prefix and key == "hydra":
            continue
        value = cfg[key]
        name = f"{prefix}{key}"
        out.append(name)
        if hasattr(value, "keys"):
            out += dotted_keys(value, f"{name}.")
    return out

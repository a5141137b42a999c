"""Bad input is one line and exit status 2, before any study or run exists."""
from __future__ import annotations

import sys

EXIT_BAD_INPUT = 2


class BadInput(ValueError):
    """A one-line message: the rule, the value, the fix."""


def exit_bad_input(err: Exception) -> None:
    line = " ".join(str(err).split())
    print(f"search: error: {line}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_BAD_INPUT)

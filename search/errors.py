"""Exit statuses, and bad input as one line before any study or run exists.

| status | meaning |
| --- | --- |
| 0 | the sweep ran its trials |
| 2 | bad input: nothing was created |
| 3 | the sweep gave up: too many trials failed (hydra.sweeper.max_failure_rate) |
| 130 | interrupted by Ctrl-C (SIGINT); the running trial was closed as failed |
| 143 | terminated by SIGTERM; the running trial was closed as failed |
"""
from __future__ import annotations

import signal
import sys

EXIT_BAD_INPUT = 2
EXIT_GAVE_UP = 3


class BadInput(ValueError):
    """A one-line message: the rule, the value, the fix."""


class Interrupted(BaseException):
    """SIGTERM, raised where the sweep is so that it unwinds like Ctrl-C: the
    running trial's process tree is killed and its trial and run are closed."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.exit_status = 128 + signum


def exit_bad_input(err: Exception) -> None:
    line = " ".join(str(err).split())
    print(f"search: error: {line}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_BAD_INPUT)


def raise_on_sigterm() -> None:
    def handler(signum: int, _frame: object) -> None:
        raise Interrupted(signum)

    signal.signal(signal.SIGTERM, handler)

"""Exit statuses, and bad input as one line before any study or run exists.

| status | meaning |
| --- | --- |
| 0 | the sweep ran its trials |
| 1 | `selftest`: a knob value the hardware check admits failed (the check is wrong); `doctor`: something a sweep needs is missing |
| 2 | bad input: nothing was created (`run`: a configuration that breaks a knob's rule or hardware check) |
| 3 | the sweep gave up: too many trials failed (hydra.sweeper.max_failure_rate) |
| 4 | `nightly`: a regression (search/nightly/regression.py says which test) |
| 5 | `nightly`: it could not run (bad input, gave up, no trial ran ok, a crash, interrupted) |
| 6 | `run`: the trial did not end ok (infeasible, failed, timeout): its table and one line on stderr say why |
| 130 | interrupted by Ctrl-C (SIGINT): running trials closed as failed and enqueued again |
| 143 | terminated by SIGTERM (preempted): as SIGINT |
"""
from __future__ import annotations

import signal
import sys
from typing import Callable

EXIT_SELFTEST_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_GAVE_UP = 3
EXIT_REGRESSION = 4
EXIT_NIGHTLY_FAILED = 5
EXIT_TRIAL_NOT_OK = 6


class BadInput(ValueError):
    """A one-line message: the rule, the value, the fix."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM, raised where the sweep is (search/sweep/interrupt.py) so that
    it unwinds: the running trials' process trees are killed, their trials and
    runs closed, their configurations enqueued again."""

    def __init__(self, signum: int) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name} (Ctrl-C)" if signum == signal.SIGINT else f"terminated by {name}")
        self.signal_name = name
        self.exit_status = 128 + signum


def exit_bad_input(err: Exception) -> None:
    from search.tracking.redact import redact  # a rule's line may quote an override that holds a URL

    line = redact(" ".join(str(err).split()))
    print(f"search: error: {line}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_BAD_INPUT)


def nightly_status(run: Callable[[], None]) -> int:
    """A nightly has three answers for cron and systemd: 0, EXIT_REGRESSION, or
    EXIT_NIGHTLY_FAILED for every way of not getting an answer."""
    try:
        run()
        return 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException as err:  # a crash or Ctrl-C must still read as "failed to run", not as a traceback's 1
        print(f"search: nightly failed: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        code = 1
    if code in (0, EXIT_REGRESSION):
        return code
    print(f"search: nightly could not run (status {code}); exit status {EXIT_NIGHTLY_FAILED}", file=sys.stderr,
          flush=True)
    return EXIT_NIGHTLY_FAILED

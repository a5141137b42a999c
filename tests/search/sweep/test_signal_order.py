"""The first signal to arrive decides, even when Python runs the pending
handlers later and in signal-number order (SIGINT before SIGTERM). A real
process, real signals: its main thread is held in one C call (an int sum,
which never checks for signals) while a SIGTERM and then a SIGINT arrive,
as a loaded machine holds it off the CPU in a burst.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

from conftest import REPO

CHILD = textwrap.dedent("""
    import sys
    from search.errors import Interrupted
    from search.sweep import interrupt

    interrupt.install()
    print("ready", flush=True)
    try:
        while True:
            sum(range(10**8))  # one C call of about a second: handlers wait until it returns
    except Interrupted as err:
        print(err.exit_status, *interrupt.ignored(), flush=True)
""")


def run_burst(signals: list[signal.Signals], gap_s: float) -> list[int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, text=True, stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)  # inside the C call
    for signum in signals:
        proc.send_signal(signum)
        time.sleep(gap_s)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return [int(word) for word in out.split()]


def test_sigterm_then_sigint_while_the_main_thread_is_busy_is_a_sigterm() -> None:
    status, *later = run_burst([signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGINT], 0.05)
    assert status == 128 + signal.SIGTERM
    assert later == [signal.SIGINT, signal.SIGTERM, signal.SIGINT]


def test_sigint_then_sigterm_is_a_sigint() -> None:
    status, *later = run_burst([signal.SIGINT, signal.SIGTERM], 0.05)
    assert status == 128 + signal.SIGINT
    assert later == [signal.SIGTERM]

"""Many runs of the real CLI, each in a fresh process, without paying its imports each time.

A fresh `python -m search` imports MLflow (about 550 modules with pandas, SQLAlchemy and FastAPI), Hydra and
Optuna before it does anything a test is about; a small test sweep trains for less CPU time than that. Run
forked from here, tests/search/sweep/test_answer.py took 92 busy CPU-seconds instead of 141 (42 tests).
`ForkedCli` starts one Python that imports the CLI, and what a sweep imports ahead, once (and starts nothing:
no Hydra initialised, no logging configured, no signal handler installed, no thread, no forkserver), then
forks it per run: each run is a new process with its own working directory, environment, import path, standard
streams and exit status, that runs `python -m search`'s own `main` as the console would, and ends as the
interpreter's shutdown would (non-daemon threads joined, then the exit handlers). What differs from a fresh
`python -m search` is only that the imports were done before the fork, so whatever a module draws at import
is the same in every run: the sweep id was, and two workers started together shared one sweep directory until
search/sweep/sweep_dir.py drew it at first use. Runs may go side by side (`ForkedCli.start`, a Popen-like
handle). Tests about the process start itself (what is imported, how long it takes) or about signals run the
CLI fresh (conftest.run_search(..., fresh=True), subprocess.Popen).
"""
from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from conftest import REPO, cli_env, pythonpath

_DRIVER = r"""
import atexit, importlib, json, os, select, sys, threading
import search.__main__ as cli
# What a multirun imports before it checks its config: Hydra's plugins, the sweeper, MLflow; and what a
# sweep imports ahead (search/sweep/import_ahead.py): the GP sampler's torch and scipy, the report's
# plotting modules. Nothing is started: a forkserver started here would be shared.
import search.commands.precheck, search.sweep.sweeper, search.trial.app, search.tracking.mlflow_runs
from hydra.core.plugins import Plugins
Plugins.instance()
from search.sweep.study import GP_IMPORTS
for module in GP_IMPORTS:
    importlib.import_module(module)
from search.reports.plots import preload
preload()
# And MLflow's SQL store, which every test's sweep (MLflow on SQLite) imports and maps at its first contact
# (search/tracking/mlflow_client.py check_reachable): 0.9-1.1 s of a sweep on 2 cores (timers in 5 sweeps).
import mlflow.store.tracking.sqlalchemy_store, sqlalchemy.orm
sqlalchemy.orm.configure_mappers()
own_path = set(filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))) | {"", os.getcwd()}
base_path = [p for p in sys.path if p not in own_path]
driver_path = {os.getcwd(), *filter(None, sys.path)}  # where the imports above came from


def child(request):
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # python -m: the working directory first, then PYTHONPATH, then the interpreter's own
    sys.path[:] = [os.getcwd(), *filter(None, request["env"].get("PYTHONPATH", "").split(os.pathsep)),
                   *base_path]
    importlib.invalidate_caches()
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.stdin = open(0, closefd=False)
    # a module on the run's own path that one imported here would hide: such a run must start fresh
    shadowed = sorted({name.removesuffix(".py") for entry in sys.path if entry not in driver_path
                       and os.path.isdir(entry) for name in os.listdir(entry)
                       if (name.endswith(".py") or os.path.exists(os.path.join(entry, name, "__init__.py")))
                       and name.removesuffix(".py") in sys.modules})
    if shadowed:
        print(f"cli_fork: the run's PYTHONPATH or working directory holds {shadowed}, imported before the "
              f"fork from elsewhere; run it fresh (run_search(..., fresh=True))", file=sys.stderr, flush=True)
        os._exit(97)
    sys.argv = [cli.__file__, *request["args"]]
    code = 0
    try:
        cli.main(request["args"])
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 0 if done.code is None else 1
        if isinstance(done.code, str):
            print(done.code, file=sys.stderr)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    threading._shutdown()  # the interpreter's shutdown: non-daemon threads first,
    atexit._run_exitfuncs()  # then the exit handlers, without tearing down every module
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def say(**message):
    os.write(1, (json.dumps(message) + "\n").encode())


# Requests on stdin, one JSON line each: a run is forked at once ("started": its pid) and reported when it
# ends ("ended": its pid, "status"), so several may run at once (workers of one study).
pending, running = b"", set()
while True:
    if select.select([0], [], [], 0.05 if running else None)[0]:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            pid = os.fork()
            if pid == 0:
                child(json.loads(line))
            running.add(pid)
            say(started=pid)
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if not pid:
            break
        running.discard(pid)
        say(ended=pid, status=os.waitstatus_to_exitcode(status))
"""


class ForkedRun:
    """One forked run, used as a subprocess.Popen of `python -m search ARGS` with its output captured:
    pid, poll(), wait(timeout), communicate(timeout) -> (stdout, stderr), returncode, send_signal(), kill()."""

    def __init__(self, cli: ForkedCli, pid: int, args: list[str], out: Path, err: Path) -> None:
        self._cli, self.pid, self.args, self._out, self._err = cli, pid, args, out, err
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._cli._status(self.pid, time.monotonic())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._cli._status(self.pid, None if timeout is None else time.monotonic() + timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(["python", "-m", "search", *self.args], timeout)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return self._out.read_text(), self._err.read_text()

    def stdout_so_far(self) -> str:
        """What the run has printed until now, while it runs."""
        return self._out.read_text()

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not reaped yet, so the pid is still this run's
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkedCli:
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": pythonpath()}
        self._driver = subprocess.Popen([sys.executable, "-c", _DRIVER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
        self._pending = b""
        self._ended: dict[int, int] = {}
        self._lock = threading.Lock()
        self._outputs = tempfile.TemporaryDirectory()

    def alive(self) -> bool:
        return self._driver.poll() is None

    def _message(self, deadline: float | None) -> dict | None:
        """The driver's next message, None past `deadline` (read from its pipe directly: a buffered reader
        could hold a line that select would then wait for in vain)."""
        fd = self._driver.stdout.fileno()
        while b"\n" not in self._pending:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and not select.select([fd], [], [], max(0.0, left))[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError("the forking CLI driver died")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        message = json.loads(line)
        if "ended" in message:
            self._ended[message["ended"]] = message["status"]
        return message

    def _status(self, pid: int, deadline: float | None) -> int | None:
        """`pid`'s exit status once it ended, None if it is still running at `deadline`."""
        while True:
            with self._lock:
                if pid in self._ended:
                    return self._ended.pop(pid)
                step = time.monotonic() + 0.1  # other threads' runs get their turn
                if self._message(step if deadline is None else min(deadline, step)) is None \
                        and deadline is not None and time.monotonic() >= deadline:
                    return self._ended.pop(pid, None)

    def start(self, *args: str, cwd: Path, full_env: dict) -> ForkedRun:
        """`python -m search ARGS` in `cwd` with exactly `full_env`, started now; its output is captured."""
        where = Path(tempfile.mkdtemp(dir=self._outputs.name))
        out, err = where / "stdout", where / "stderr"
        out.touch()
        err.touch()  # there to read even when the run is killed before it opens them
        request = {"args": list(args), "cwd": str(cwd), "env": full_env, "stdout": str(out), "stderr": str(err)}
        with self._lock:
            self._driver.stdin.write(json.dumps(request) + "\n")
            self._driver.stdin.flush()
            while "started" not in (message := self._message(None)):
                pass
        return ForkedRun(self, message["started"], list(args), out, err)

    def run(self, *args: str, cwd: Path, env: dict | None = None, timeout_s: float | None = None,
            full_env: dict | None = None) -> subprocess.CompletedProcess:
        """Like conftest.run_search (`full_env`: the whole environment, as it builds it): the same result, and
        subprocess.TimeoutExpired when the run takes longer than `timeout_s` (the run is killed, as
        subprocess.run kills its child)."""
        proc = self.start(*args, cwd=cwd, full_env=cli_env(env) if full_env is None else full_env)
        try:
            out, err = proc.communicate(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(["python", "-m", "search", *args], timeout_s, out, err) from None
        finally:
            shutil.rmtree(proc._out.parent, ignore_errors=True)
        return subprocess.CompletedProcess(["python", "-m", "search", *args], proc.returncode, out, err)

    def close(self) -> None:
        if self._driver.stdin and not self._driver.stdin.closed:
            self._driver.stdin.close()
        self._driver.wait(timeout=30)
        self._outputs.cleanup()


_SHARED: list[ForkedCli] = []


def shared() -> ForkedCli:
    """One driver per test process, started at its first use and closed when the process ends."""
    if not (_SHARED and _SHARED[0].alive()):
        _SHARED[:] = [ForkedCli()]
        atexit.register(_SHARED[0].close)
    return _SHARED[0]

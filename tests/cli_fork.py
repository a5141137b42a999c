"""Many short runs of the real CLI, each in a fresh process, without paying its imports each time.

A bad-input run spends ~7 s of CPU importing torch, MLflow, Optuna and Hydra and
well under one second on what the test is about. `ForkedCli` starts one Python
that imports the CLI once (nothing else: no Hydra initialised, no logging
configured, no signal handler installed), then forks it per run: each run is
a new process with its own working directory, environment and exit status,
that runs `python -m search`'s own `main` as the console would, and ends with
the exit handlers and the exit status the interpreter's shutdown would give.
What differs from `run_search` is only that the imports were done before the
fork.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import REPO, pythonpath

_DRIVER = r"""
import atexit, json, os, sys
import search.__main__ as cli
# What a multirun imports before it checks its config: Hydra's plugins, the sweeper, MLflow,
# torch (through objectives/). Nothing is started: a forkserver started here would be shared.
import search.commands.precheck, search.sweep.sweeper, search.trial.app, search.tracking.mlflow_runs
from hydra.core.plugins import Plugins
Plugins.instance()

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        sys.argv = ["search", *request["args"]]
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
        atexit._run_exitfuncs()  # what the interpreter's shutdown runs, without tearing down every module
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
"""


class ForkedCli:
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": pythonpath()}
        self._driver = subprocess.Popen([sys.executable, "-c", _DRIVER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)

    def run(self, *args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
        """Like conftest.run_search: the same environment, the same result."""
        full_env = {**os.environ, "PYTHONPATH": pythonpath(), "COLUMNS": "200", "SEARCH_GPU_DEFAULT": "0", **(env or {})}
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {"args": list(args), "cwd": str(cwd), "env": full_env, "stdout": str(out), "stderr": str(err)}
            self._driver.stdin.write(json.dumps(request) + "\n")
            self._driver.stdin.flush()
            line = self._driver.stdout.readline()
            if not line:
                raise RuntimeError("the forking CLI driver died")
            return subprocess.CompletedProcess(["python", "-m", "search", *args], json.loads(line),
                                               out.read_text(), err.read_text())

    def close(self) -> None:
        self._driver.stdin.close()
        self._driver.wait(timeout=30)

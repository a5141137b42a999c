"""The trials' forkserver starts importing torch as soon as Hydra has composed a multirun of this
app (conf/config.yaml's callback, search/trial/app.py WarmUp), and only under Hydra's basic
launcher: under another launcher the trials run in that launcher's processes, each with its own.
The sweeper's own call, later, gets the same start. `python -m search multirun` starts it sooner, before
Hydra composes, when the command line says the trials run here; and it exits at once when the sweep ends."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from search.trial import isolate

from conftest import REPO, pythonpath


@pytest.mark.parametrize("name, overrides, starts", [
    ("config", [], True),
    ("nightly", [], True),
    ("config", ["hydra/launcher=joblib"], False),
])
def test_the_composed_callback_starts_the_forkserver_only_under_the_basic_launcher(
        monkeypatch: pytest.MonkeyPatch, name: str, overrides: list[str], starts: bool) -> None:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(name, overrides=overrides, return_hydra_config=True)
    monkeypatch.setattr(isolate, "_warming", None)  # as in a fresh sweep process
    instantiate(cfg.hydra.callbacks.warm_up).on_multirun_start(config=cfg, config_name=name)
    if not starts:
        assert isolate._warming is None
        return
    started = isolate._warming
    assert started is not None and isolate.warm_up() is started  # the sweeper's call: the same start
    started.join(120)
    assert not started.is_alive()  # the forkserver is up: the first trial forks from it at once


@pytest.mark.parametrize("rest, here", [
    ([], True),
    (["hydra.sweeper.n_trials=4", "batch_size=choice(32,64)"], True),
    (["hydra/launcher=joblib"], False),
    (["+hydra.launcher.n_jobs=2"], False),
    (["--cfg", "job"], False),
    (["--info", "defaults"], False),
    (["--help"], False),
    (["--config-dir", "/elsewhere"], False),
    (["-cn"], False),  # does not parse: the command line's check says so, and nothing starts before it
])
def test_the_command_line_starts_the_forkserver_before_hydra_only_when_the_trials_run_here(
        rest: list[str], here: bool) -> None:
    from search.__main__ import trials_run_here

    assert trials_run_here(rest) is here


def test_the_forkserver_starts_before_the_command_line_is_checked(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """The check composes the config (0.7 s on 2 cores with its imports): the forkserver's torch import had
    waited for it, and the first trial for the forkserver. A command line the check refuses ends the
    forkserver at the exit (test_a_refused_sweep_does_not_keep_its_output_open_while_the_forkserver_boots)."""
    import search.__main__ as cli
    from search.commands import precheck

    order: list[str] = []
    checked = precheck.check_command_line
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setenv("SEARCH_GPU_DEFAULT", "0")
    monkeypatch.setattr(isolate, "warm_up", lambda: order.append("forkserver"))
    monkeypatch.setattr(precheck, "check_command_line", lambda *a, **k: (order.append("check"), checked(*a, **k))[1])
    for rest, started in (["no_such_knob=1"], ["forkserver", "check"]), \
            (["hydra/launcher=joblib", "no_such_knob=1"], ["check"]):  # there the launcher's processes fork
        order.clear()
        with pytest.raises(SystemExit) as done:
            cli.main(["multirun", *rest])
        assert done.value.code == 2 and order == started
    assert list(tmp_path.iterdir()) == []


def test_the_forkserver_exits_without_tearing_torch_down(tmp_path: Path) -> None:
    """An exit handler of a module preloaded before forkserver_exit (as torch's are) never runs: the
    forkserver's own handler, registered last, runs first and ends the process. Without it, Python's exit
    would finalise torch while the sweep's stdout was still open in the forkserver."""
    marker = tmp_path / "torn-down"
    (tmp_path / "late_teardown.py").write_text(
        f"import atexit, pathlib\natexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes')\n")
    script = ("import multiprocessing as mp, time\n"
              "if __name__ == '__main__':\n"
              "    ctx = mp.get_context('forkserver')\n"
              "    ctx.set_forkserver_preload(['late_teardown', *PRELOAD])\n"
              "    p = ctx.Process(target=time.sleep, args=(0,)); p.start(); p.join()\n"
              "    print('sweep done', flush=True)\n")
    env = {**os.environ, "PYTHONPATH": pythonpath(tmp_path, REPO)}
    for preload, torn_down in ([], True), (["objectives.forkserver_exit"], False):
        marker.unlink(missing_ok=True)
        # the output read to its end, as a pipe does: it ends when the forkserver has exited too
        out = subprocess.run([sys.executable, "-c", script.replace("PRELOAD", repr(preload))], env=env,
                             capture_output=True, text=True, timeout=120, check=True)
        assert out.stdout == "sweep done\n" and out.stderr == ""
        assert marker.exists() is torn_down, preload


def test_forkserver_exit_imported_anywhere_else_changes_no_exit_status() -> None:
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    code = "import objectives.forkserver_exit; raise SystemExit(3)"
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=120).returncode == 3


def test_a_refused_sweep_does_not_keep_its_output_open_while_the_forkserver_boots(tmp_path: Path) -> None:
    """The forkserver starts before Hydra composes, and shares the command's stdout and stderr: a sweep that
    then refuses its config exits while the forkserver still imports torch, and a pipe reading the command
    (`| tee`, CI) would wait for that import. The command's exit ends its forkserver (isolate._stop_forkserver),
    so the pipes close with it."""
    import select
    import time

    env = {**os.environ, "PYTHONPATH": pythonpath(), "SEARCH_GPU_DEFAULT": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "search", "multirun", "batch_size=-3"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.wait(timeout=120) == 2
    exited, output = time.monotonic(), b""
    while time.monotonic() - exited < 0.2:  # the rest of a torch import took 0.2-0.8 s here; a signal's delivery none
        if select.select([proc.stdout], [], [], 0.05)[0]:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            output += chunk
    else:
        pytest.fail(f"the output stayed open for more than 0.2 s after the command exited: {output[-500:]!r}")
    proc.stdout.close()
    assert b"batch_size must be an int >= 1" in output and b"Traceback" not in output
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_the_imports_ahead_start_once_the_first_trial_runs(tmp_path: Path, empty_mlflow_db: Path) -> None:
    """The sampler's and the report's modules are imported ahead on a thread (search/sweep/import_ahead.py) from
    the first trial's launch on, while the sweep waits for that trial: started before it, the
    thread took the GIL from the first trial's proposal (its config composed, its MLflow run made: 0.46 s of a
    0.64 s proposal on 2 cores, 0.07 s without the thread), and the first trial started later."""
    import json
    import shutil

    shutil.copy(empty_mlflow_db, tmp_path / "mlflow.db")
    seen = tmp_path / "seen.json"
    code = ("import json, multiprocessing, sys\n"
            "import search.sweep.import_ahead as ahead\n"
            "from search.__main__ import main\n"
            "real, calls = ahead.import_ahead, []\n"
            "def watched(*args):\n"
            "    calls.append(sorted(p.name for p in multiprocessing.active_children()))\n"
            "    return real(*args)\n"
            "ahead.import_ahead = watched\n"
            "try:\n"
            "    main(sys.argv[1:])\n"
            "finally:\n"
            f"    open({str(seen)!r}, 'w').write(json.dumps(calls))\n")
    env = {**os.environ, "PYTHONPATH": pythonpath(), "SEARCH_GPU_DEFAULT": "0",
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"}
    out = subprocess.run([sys.executable, "-c", code, "multirun", "hydra.sweeper.n_trials=1",
                          "hydra.sweeper.baseline_repeats=0", "hydra.sweeper.report=false", "train.budget_samples=600",
                          "train.warmup_steps=1", "train.window_steps=2"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(seen.read_text()) == [["search-trial"]]  # once, with the first trial running


def test_the_sweep_stops_its_import_thread_and_joins_it_in_a_users_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler's and the report's modules are imported on a thread (search/sweep/import_ahead.py); left
    running past the sweep, an import there meets Python's exit ("can't register atexit
    after shutdown", printed after a one-trial sweep's answer). However the sweep ends, the thread imports no
    module more; in a user's own Hydra app the sweep joins it, while `python -m search` ends the process
    without waiting for it (search/leave.py: joined, a starved thread held a finished sweep for minutes)."""
    import threading

    from search import leave
    from search.sweep.sweeper import SweeperImpl

    for ours in (False, True):
        monkeypatch.setattr(leave, "_ours", ours)
        for ending in ("returns", "raises"):
            impl = SweeperImpl.__new__(SweeperImpl)  # its state only: the thread, not a Hydra sweep
            impl._imported_enough = threading.Event()
            impl._importing = threading.Thread(target=impl._imported_enough.wait, args=(2.0,))
            impl._importing.start()

            def body(arguments: list[str], ending: str = ending) -> str:
                if ending == "raises":
                    raise KeyboardInterrupt
                return "study"

            monkeypatch.setattr(impl, "_sweep", body)
            if ending == "raises":
                with pytest.raises(KeyboardInterrupt):
                    impl.sweep([])
            else:
                assert impl.sweep([]) == "study"
            assert impl._imported_enough.is_set()
            if not ours:
                assert not impl._importing.is_alive()
            impl._importing.join()

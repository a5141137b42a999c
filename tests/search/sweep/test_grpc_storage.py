"""`hydra.sweeper.storage=grpc://host:port`: the sweep's storage opener talks
to Optuna's gRPC storage proxy (started here with `python -m
search.sweep.grpc_storage`), and what it writes lands in the proxied database."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from conftest import REPO
from search.errors import BadInput
from search.trial.learning_curve import open_trial_storage
from search.sweep.study import load_or_create, open_storage
from servers import free_port

pytest.importorskip("grpc")


def test_grpc_proxy_storage(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/study.db"
    port = free_port()
    proxy = subprocess.Popen([sys.executable, "-m", "search.sweep.grpc_storage", database, "--host", "127.0.0.1",
                              "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    try:
        # The proxy imports Optuna and opens its database first: over 10 s (open_storage's wait) under the suite's
        # load on a slow machine once. Wait for it to listen, then open as a sweep does.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proxy.poll() is None:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        storage = open_storage(f"grpc://127.0.0.1:{port}")  # waits until the proxy answers
        study, existed = load_or_create("proxied", storage, ["maximize"], optuna.samplers.RandomSampler(seed=0))
        assert not existed
        for _ in range(3):
            trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
            study.tell(trial, trial.params["x"])
        # a trial's reporter (Optuna's pruners across processes) reaches the study through the proxy too
        from_trial = optuna.load_study(study_name="proxied", storage=open_trial_storage(f"grpc://127.0.0.1:{port}"))
        assert len(from_trial.trials) == 3
    finally:
        proxy.terminate()
        output = proxy.communicate(timeout=30)[0]
    assert f"on grpc://127.0.0.1:{port}" in output
    direct = optuna.load_study(study_name="proxied", storage=database)
    assert [t.value for t in direct.trials] == [t.params["x"] for t in direct.trials] and len(direct.trials) == 3

    with pytest.raises(BadInput, match="grpc://host:port"):
        open_storage("grpc://127.0.0.1:13000/not-a-path")

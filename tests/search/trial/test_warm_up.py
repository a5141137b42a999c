"""The trials' forkserver starts importing torch as soon as Hydra has composed a multirun of this
app (conf/config.yaml's callback, search/trial/app.py WarmUp), and only under Hydra's basic
launcher: under another launcher the trials run in that launcher's processes, each with its own.
The sweeper's own call, later, gets the same start."""
from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from search.trial import isolate

from conftest import REPO


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

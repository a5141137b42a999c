"""Hydra's composition errors with a fix a user can paste (search/composition_errors.py), on Hydra's own errors."""
from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from search.composition_errors import dotted_keys, first_line, fix_for
from search.paths import conf_dir


def _error(overrides: list[str]) -> BaseException:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        with pytest.raises(Exception) as caught:
            compose("config", overrides=overrides)
    return caught.value


def _keys() -> list[str]:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return dotted_keys(compose("config"))


def test_a_misspelt_key_gets_the_closest_key_and_a_missing_option_the_groups_options() -> None:
    keys = _keys()
    assert "loader.num_workers" in keys and not any(k.startswith("hydra") for k in keys)
    assert fix_for(_error(["batch_sise=3"]), keys) == "did you mean batch_size?"
    assert fix_for(_error(["loader.num_worker=2"]), keys) == "did you mean loader.num_workers?"
    missing = _error(["objective=nosuch"])
    assert first_line(missing) == "In 'config': Could not find 'objective/nosuch'"
    assert fix_for(missing, keys) == "objective=<custom|digits|gpt|resnet>"
    assert fix_for(_error(["nosuch.knob=3"]), keys) is None  # nothing close: the caller's general fix

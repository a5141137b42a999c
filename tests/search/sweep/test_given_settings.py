"""Which hydra.sweeper settings a user's app wrote, as opposed to the sweeper's
defaults (search/sweep/sweep_settings.py, given_settings): what a user's own
task is optimised on depends on it (search/sweep/planning.py)."""

import textwrap
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.types import HydraContext

from search.sweep.sweep_settings import given_settings

PRIMARY = """
defaults:
  - override hydra/sweeper: search
x: 1
"""


def given(conf: Path, primary: str, overrides: tuple[str, ...] = ()) -> frozenset[str] | None:
    (conf / "config.yaml").write_text(textwrap.dedent(primary))
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
        context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=None)
        return given_settings(context, cfg, ("metrics", "objectives", "direction"))


def test_the_sweepers_defaults_are_not_given(tmp_path: Path) -> None:
    assert given(tmp_path, PRIMARY) == frozenset()


def test_a_setting_in_the_primary_config_or_on_the_command_line_is_given(tmp_path: Path) -> None:
    assert given(tmp_path, PRIMARY + "hydra:\n  sweeper:\n    direction: minimize\n") == {"direction"}
    assert given(tmp_path, PRIMARY, ("hydra.sweeper.metrics=[loss]",)) == {"metrics"}
    # equal to the default, and given all the same
    assert given(tmp_path, PRIMARY + "hydra:\n  sweeper:\n    metrics: [throughput_samples_per_s, val_accuracy]\n"
                 ) == {"metrics"}


def test_a_setting_in_a_config_group_file_of_the_sweepers_package_is_given(tmp_path: Path) -> None:
    (tmp_path / "space").mkdir()
    (tmp_path / "space" / "mine.yaml").write_text("# @package hydra.sweeper\nobjectives: [loss]\n")
    primary = PRIMARY.replace("defaults:\n", "defaults:\n  - _self_\n  - space: mine\n")
    assert given(tmp_path, primary) == {"objectives"}
    assert given(tmp_path, PRIMARY) == frozenset()

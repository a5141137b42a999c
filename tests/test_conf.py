"""Every YAML file in conf/ composes and passes the knob rules; conf/ is found
from a checkout and from a non-editable install."""
from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from objectives import parse_config
from objectives.config_check import CombinationError
from search.paths import conf_dir
from search.sweep.space import build_space, to_override

from conftest import REPO

CONF = REPO / "conf"
# An option that needs the user's own code gets a stand-in for it.
NEEDS = {("objective", "custom"): ["objective.callable=mypkg.train:objective"]}
GROUPS = {group: sorted(p.stem for p in (CONF / group).glob("*.yaml")) for group in ("objective", "search")}


def test_checkout_finds_the_repositorys_conf() -> None:
    assert conf_dir() == CONF


@pytest.mark.parametrize("group, name", [(g, n) for g, names in GROUPS.items() for n in names])
def test_every_option_composes_and_every_space_value_is_a_valid_knob(group: str, name: str) -> None:
    check_composes([f"{group}={name}", *NEEDS.get((group, name), [])])


# conf/search_objective/<space>_<objective>.yaml: what a space sets for one workload (gpu_gpt: gpt2-small)
PAIRS = sorted(tuple(p.stem.split("_", 1)) for p in (CONF / "search_objective").glob("*.yaml"))


@pytest.mark.parametrize("space, objective", PAIRS)
def test_every_space_composes_with_every_objective_it_has_settings_for(space: str, objective: str) -> None:
    assert space in GROUPS["search"] and objective in GROUPS["objective"]
    check_composes([f"search={space}", f"objective={objective}", *NEEDS.get(("objective", objective), [])])


def check_composes(base: list[str]) -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=base, return_hydra_config=True)
        params = OmegaConf.to_container(cfg.hydra.sweeper.params)
        parse_config(OmegaConf.to_container(compose("config", overrides=base), resolve=True))
        space = build_space(params, [])
        for key, dist in space.distributions.items():
            for value in values_of(dist):
                parses_with_some_swept_partner(base, space, key, value)


def values_of(dist) -> list:
    return list(getattr(dist, "choices", None) or (dist.low, dist.high))


def parses_with_some_swept_partner(base: list[str], space, key: str, value) -> None:
    """`key=value` parses at the other knobs' defaults, or, when a combination rule ties it to knobs the
    space also sweeps (fp8 needs compile), with some value of those: the sampler can reach it."""
    probe = [*base, to_override(key, value)]
    try:
        parse_config(OmegaConf.to_container(compose("config", overrides=probe), resolve=True))
        return
    except CombinationError as err:
        partners = [f for f in err.fields if f != key]
        if not partners or not all(f in space.distributions for f in partners):
            raise
    for combo in itertools.product(*(values_of(space.distributions[f]) for f in partners)):
        lines = [to_override(f, v) for f, v in zip(partners, combo)]
        try:
            parse_config(OmegaConf.to_container(compose("config", overrides=[*probe, *lines]), resolve=True))
            return
        except CombinationError:
            continue
    raise AssertionError(f"{key}={value} parses with no value of the swept {partners}")


def test_non_editable_install_ships_conf(tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    assert (target / "search" / "conf" / "config.yaml").is_file()
    assert (target / "search" / "conf" / "search" / "default.yaml").is_file()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shown = subprocess.run([sys.executable, "-m", "search", "run", "--cfg", "job"], cwd=outside, text=True,
                           capture_output=True, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "budget_samples" in shown.stdout
    located = subprocess.run([sys.executable, "-c", "import search.paths as p; print(p.conf_dir())"], cwd=outside,
                             text=True, capture_output=True, env={"PYTHONPATH": str(target)}, check=True)
    assert Path(located.stdout.strip()) == target / "search" / "conf"


def test_the_nightly_preset_composes_on_top_of_the_config() -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("nightly", overrides=["objective=gpt", "hydra.sweeper.nightly.repeats=3"], return_hydra_config=True)
    sweeper = cfg.hydra.sweeper
    assert sweeper.nightly.enabled and sweeper.nightly.repeats == 3 and sweeper.nightly.series == "nightly-gpt"
    assert sweeper.study_name.startswith("nightly-gpt-20") and sweeper.experiment_name == "nightly-gpt"
    assert cfg.batch_size == 64 and sweeper.params  # conf/config.yaml's knobs and space underneath
    parse_config(OmegaConf.to_container(compose_plain("nightly", ["objective=gpt"]), resolve=True))


def compose_plain(name: str, overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(name, overrides=overrides)

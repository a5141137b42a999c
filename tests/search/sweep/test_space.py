"""Every construct of Hydra's sweep grammar maps to the right Optuna distribution."""
from __future__ import annotations

import pytest
from optuna.distributions import (
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from search.errors import BadInput
from search.sweep.space import (
    build_space,
    distribution_from_override,
    grid_values,
    keep_applied,
    parse_overrides,
    to_override,
)


def dist(line: str):
    return distribution_from_override(parse_overrides([line])[0])


@pytest.mark.parametrize(
    "line, expected",
    [
        ("x=choice(32, 64, 128)", CategoricalDistribution([32, 64, 128])),
        ("x=choice(fp32, bf16)", CategoricalDistribution(["fp32", "bf16"])),
        ("x=choice(true, false)", CategoricalDistribution([True, False])),
        ("x=choice(0.0, 0.5)", CategoricalDistribution([0.0, 0.5])),
        ("x=32,64", CategoricalDistribution([32, 64])),
        # Hydra's range stops before `stop`.
        ("x=range(1, 5)", IntDistribution(1, 4)),
        ("x=range(0, 10, step=3)", IntDistribution(0, 9, step=3)),
        ("x=range(0, 11, step=5)", IntDistribution(0, 10, step=5)),
        ("x=range(0.0, 1.0, step=0.25)", FloatDistribution(0.0, 0.75, step=0.25)),
        ("x=interval(0.1, 0.9)", FloatDistribution(0.1, 0.9)),
        ("x=interval(1, 4)", FloatDistribution(1.0, 4.0)),
        ("x=tag(log, interval(1e-4, 1e-1))", FloatDistribution(1e-4, 1e-1, log=True)),
    ],
)
def test_grammar_to_distribution(line: str, expected) -> None:
    assert dist(line) == expected


def test_shuffled_range_is_categorical_over_hydras_values() -> None:
    got = dist("x=shuffle(range(1, 4))")
    assert isinstance(got, CategoricalDistribution)
    assert sorted(got.choices) == [1, 2, 3]


@pytest.mark.parametrize(
    "line, words",
    [
        ("x=choice()", "grammar"),
        ("x=choice(1,2", "grammar"),
        ("x=interval(1, 0)", "low < high"),
        ("x=range(5, 1)", "start < stop"),
        ("x=tag(log, interval(0, 1))", "low > 0"),
        ("x=choice(1, 1)", "distinct"),
    ],
)
def test_bad_grammar_is_one_line(line: str, words: str) -> None:
    with pytest.raises(BadInput) as err:
        build_space({}, [line])
    assert words in str(err.value)
    assert "\n" not in str(err.value)
    assert "fix:" in str(err.value)


def test_command_line_wins_over_config_params_and_fixed_overrides_pass_through() -> None:
    space = build_space({"batch_size": "choice(32, 64)", "precision": "choice(fp32, bf16)"},
                        ["batch_size=choice(128, 256)", "train.budget_samples=3000", "precision=bf16"])
    assert space.distributions == {"batch_size": CategoricalDistribution([128, 256])}
    assert space.fixed_overrides == ["train.budget_samples=3000", "precision=bf16"]


def test_empty_space_is_bad_input() -> None:
    with pytest.raises(BadInput, match="at least one knob"):
        build_space({}, ["batch_size=64"])


@pytest.mark.parametrize(
    "key, value, line",
    [
        ("batch_size", 64, "batch_size=64"),
        ("model_pruning.ratio", 0.25, "model_pruning.ratio=0.25"),
        ("loader.pin_memory", True, "loader.pin_memory=true"),
        ("precision", "bf16", "precision=bf16"),
        ("objective.channels", "[16,32]", "objective.channels=[16,32]"),
        ("note", "a b", "note='a b'"),
    ],
)
def test_sampled_values_become_overrides_hydra_parses_back(key, value, line) -> None:
    assert to_override(key, value) == line
    parsed = parse_overrides([line])[0]
    assert parsed.get_key_element() == key


def test_grid_keeps_hydras_stop_exclusive_range() -> None:
    space = build_space({}, ["a=range(1, 4)", "b=choice(x, y)"])
    assert grid_values(space.distributions) == {"a": [1, 2, 3], "b": ["x", "y"]}


DEFAULT_SPACE = {"batch_size": "choice(32,64)", "loader.num_workers": "choice(0,1,2)",
                 "loader.persistent_workers": "choice(false,true)", "precision": "choice(fp32,bf16)",
                 "model_pruning.ratio": "choice(0.0,0.5)", "parallel.devices": "choice(1,2)"}
KNOWN = ["batch_size", "loader.num_workers", "loader.persistent_workers", "precision", "model_pruning.ratio",
         "model_pruning.method", "parallel.devices", "train.budget_samples"]
WHO = "objective.callable myproj.train:objective"


def test_an_objective_that_declares_its_knobs_keeps_only_those_said_in_one_line() -> None:
    space = build_space(DEFAULT_SPACE, ["train.budget_samples=800"])
    kept, line = keep_applied(space, ["batch_size", "loader"], WHO, KNOWN)
    assert list(kept.distributions) == ["batch_size", "loader.num_workers", "loader.persistent_workers"]
    assert kept.fixed_overrides == ["train.budget_samples=800"]
    assert line == ("not searched: precision, model_pruning.ratio, parallel.devices: "
                    "objective.callable myproj.train:objective applies only batch_size, loader")


def test_an_objective_that_declares_nothing_or_everything_keeps_the_space() -> None:
    space = build_space(DEFAULT_SPACE, [])
    assert keep_applied(space, None, WHO, KNOWN) == (space, None)
    assert keep_applied(space, ["batch_size", "loader", "precision", "model_pruning", "parallel"], WHO, KNOWN)[1] is None


@pytest.mark.parametrize("applied, message", [
    (["batch_size", "loader.num_worker"], "got 'loader.num_worker', which it has none of"),
    (["train"], "must vary a knob objective.callable myproj.train:objective applies; got batch_size, "),
    ([], "it applies only none"),
])
def test_a_declaration_that_names_no_knob_or_leaves_nothing_to_search_is_bad_input(applied, message) -> None:
    with pytest.raises(BadInput, match=message):
        keep_applied(build_space(DEFAULT_SPACE, []), applied, WHO, KNOWN)

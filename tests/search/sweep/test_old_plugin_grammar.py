"""The old hydra-optuna-sweeper plugin's `tag(int, interval(...))` samples integers here too."""

import pytest
from optuna.distributions import FloatDistribution, IntDistribution

from search.errors import BadInput
from search.sweep.space import build_space


def test_an_int_tagged_interval_is_integers_with_both_bounds_included():
    space = build_space({"x": "tag(int, interval(1, 10))", "y": "tag(log, int, interval(1, 1024))",
                         "z": "interval(1, 10)"}, [])
    assert space.distributions == {"x": IntDistribution(1, 10), "y": IntDistribution(1, 1024, log=True),
                                   "z": FloatDistribution(1.0, 10.0)}


def test_an_int_tagged_interval_without_an_integer_is_refused():
    with pytest.raises(BadInput, match="needs an integer in"):
        build_space({"x": "tag(int, interval(1.2, 1.8))"}, [])

"""The sampler the sweep builds, and what it says about large studies."""
from __future__ import annotations

import optuna

from search.sweep.study import GP_LARGE_STUDY_TRIALS, large_study_notice, make_sampler


def test_the_gp_sampler_warns_before_a_study_too_large_for_it_and_tpe_does_not() -> None:
    gp = make_sampler({"_target_": "optuna.samplers.GPSampler"}, seed=0, distributions={})
    tpe = make_sampler({"_target_": "optuna.samplers.TPESampler", "multivariate": True}, seed=0, distributions={})
    assert isinstance(gp, optuna.samplers.GPSampler)
    assert large_study_notice(gp, GP_LARGE_STUDY_TRIALS) is None
    notice = large_study_notice(gp, 1200)
    assert notice is not None and "1200 trials" in notice and "hydra/sweeper/sampler=tpe" in notice
    assert large_study_notice(tpe, 5000) is None

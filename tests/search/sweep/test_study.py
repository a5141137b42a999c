"""The sampler the sweep builds, and what it says about large studies."""
from __future__ import annotations

import hashlib

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


def test_the_gp_sampler_optimises_its_acquisition_batched() -> None:
    """greenlet is a dependency: without it Optuna's GP sampler (the default) falls back to one L-BFGS-B
    restart after another (ask 200 ms instead of 130 ms, 5 knobs, 20 trials) and says so only in a warning
    that the sweep's logging hides."""
    import subprocess
    import sys

    code = ("import optuna\n"
            "study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=0, n_startup_trials=2))\n"
            "study.optimize(lambda t: t.suggest_float('x', 0, 1) ** 2, n_trials=3)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "greenlet" not in out.stderr


def test_a_sampler_argument_of_the_wrong_kind_is_refused_before_anything_runs() -> None:
    import pytest
    from optuna.distributions import CategoricalDistribution

    from hydra_plugins.search_sweeper.search_sweeper import _SAMPLER_ARGS, _SAMPLERS
    from search.errors import BadInput

    space = {"batch_size": CategoricalDistribution([32, 64])}
    for name, target in _SAMPLERS.items():  # every sampler the config group offers builds as shipped
        make_sampler({"_target_": target, "seed": None, **_SAMPLER_ARGS.get(name, {})}, seed=0, distributions=space)
    # was: a GPSampler built with it, ran 8 trials, then failed comparing an int with a str, leaving the study
    with pytest.raises(BadInput, match=r"hydra.sweeper.sampler.n_startup_trials must be a number; got 'abc'; "
                                       r"fix: hydra.sweeper.sampler.n_startup_trials=10 \(its default\)"):
        make_sampler({"_target_": "optuna.samplers.GPSampler", "n_startup_trials": "abc"}, seed=0, distributions=space)
    with pytest.raises(BadInput, match="hydra.sweeper.sampler.multivariate must be true or false; got 'yes'"):
        make_sampler({"_target_": "optuna.samplers.TPESampler", "multivariate": "yes"}, seed=0, distributions=space)


def test_a_studys_id_stays_when_its_journal_moves_and_differs_for_another_study_of_that_name(tmp_path) -> None:
    """search.study_id (MLflow tags of every run) was a hash of the storage's path: the runs of one study got two
    ids once its journal was moved or reached by another path."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from search.sweep.study import study_identity

    def open_study(path) -> optuna.Study:
        return optuna.create_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(path))),
                                   load_if_exists=True)

    first = study_identity(open_study(tmp_path / "a.journal"), str(tmp_path / "a.journal"), "host:1:2@100.0")
    (tmp_path / "moved").mkdir()
    (tmp_path / "a.journal").rename(tmp_path / "moved" / "b.journal")
    moved = study_identity(open_study(tmp_path / "moved" / "b.journal"), str(tmp_path / "moved" / "b.journal"))
    assert moved["search.study_id"] == first["search.study_id"] and moved["search.storage"].endswith("b.journal")
    other = study_identity(open_study(tmp_path / "a.journal"), str(tmp_path / "a.journal"),  # made anew, same path
                           "host:3:4@200.0")
    assert len(other["search.study_id"]) == 12 and other["search.study_id"] != first["search.study_id"]

    old = open_study(tmp_path / "old.journal")  # made before the id was kept: its runs carry the path's hash
    old.tell(old.ask(), 1.0)
    kept = study_identity(old, str(tmp_path / "old.journal"))
    assert kept == study_identity(old, str(tmp_path / "old.journal"))
    where = kept["search.storage"]
    assert kept["search.study_id"] == hashlib.sha256(f"{where}\ns\n{old._study_id}".encode()).hexdigest()[:12]
    together = [open_study(tmp_path / "new.journal") for _ in range(2)]  # two workers' handles on a new study
    assert len({study_identity(s, str(tmp_path / "new.journal"), "host:5:6@300.0")["search.study_id"]
                for s in together}) == 1

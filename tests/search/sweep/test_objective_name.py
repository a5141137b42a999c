"""conf/nightly.yaml (the study, experiment and series) and conf/search/gpu.yaml (the study) are named with
`${search.objective:}`: two apps of `objective=custom` in one storage no longer share a series or a study
(search/sweep/objective_name.py)."""
from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

import search  # noqa: F401  registers the resolvers, as every entry point does
from search.paths import conf_dir


@pytest.mark.parametrize("overrides, label", [
    ([], "digits"),
    (["objective=gpt"], "gpt"),
    (["objective=custom", "objective.callable=mypkg.train:objective"], "mypkg.train.objective"),
    (["objective=custom", "+objective.model={_target_:mypkg.nets.Net}", "+objective.train_dataset={_target_:mypkg.data.Train}"],
     "mypkg.nets.Net"),
    (["objective=custom", "objective.name=resnet_prod", "objective.callable=a.b:c"], "resnet_prod"),
])
def test_the_nightly_is_named_after_the_objective(overrides: list[str], label: str) -> None:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("nightly", overrides=overrides, return_hydra_config=True)
    sweeper = cfg.hydra.sweeper
    assert sweeper.nightly.series == f"nightly-{label}"
    assert sweeper.experiment_name == f"nightly-{label}"
    assert sweeper.study_name.startswith(f"nightly-{label}-20")


def test_the_gpu_space_names_its_study_after_the_objective() -> None:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("config", overrides=["search=gpu", "objective=custom", "objective.callable=mypkg.train:objective"],
                      return_hydra_config=True)
    assert cfg.hydra.sweeper.study_name == "mypkg.train.objective-gpu"

"""What `export` writes as a trial's overrides, and `python -m search run --from FILE`."""

import optuna
import pytest
import yaml
from optuna.distributions import CategoricalDistribution

from search.__main__ import exported_overrides
from search.commands.export import job_overrides
from search.errors import BadInput


def test_the_sweeps_own_settings_and_per_trial_instructions_are_left_out_the_search_path_kept():
    lines = ["hydra.searchpath=[file:///home/me/proj/conf]", "objective=mlp", "hydra.sweeper.n_trials=4",
             "train.budget_samples=512", "batch_size=32", "train.stop_below_samples_per_s=812.5",
             "trial.optuna_study=mlp", "trial.optuna_trial_number=3", "+trial.visible_devices='0'"]
    trial = optuna.trial.create_trial(params={"batch_size": 32}, distributions={
        "batch_size": CategoricalDistribution([32, 64])}, values=[1.0, 0.5], user_attrs={"overrides": lines})
    assert job_overrides(trial) == ["hydra.searchpath=[file:///home/me/proj/conf]", "objective=mlp",
                                    "train.budget_samples=512", "batch_size=32"]


def test_run_from_puts_the_files_overrides_first_so_the_command_line_wins(tmp_path):
    best = tmp_path / "best.yaml"
    best.write_text(yaml.safe_dump({"study": "mlp", "overrides": ["objective=mlp", "batch_size=32"]}))
    assert exported_overrides(["--from", str(best), "batch_size=16"]) == ["objective=mlp", "batch_size=32",
                                                                          "batch_size=16"]
    assert exported_overrides([f"--from={best}", "-c", "job"]) == ["objective=mlp", "batch_size=32", "-c", "job"]
    assert exported_overrides(["batch_size=16"]) == ["batch_size=16"]
    with pytest.raises(BadInput, match="--from needs a file"):
        exported_overrides(["batch_size=16", "--from"])


def test_a_misspelt_metric_in_an_export_rule_names_the_closest_reported_one():
    # was: "has none that does; fix: relax --where or run more trials", and for --best a fix that failed again
    from search.commands.export import choose

    study = optuna.create_study(directions=["maximize", "maximize"])
    study.set_metric_names(["throughput_samples_per_s", "val_accuracy"])
    study.add_trial(optuna.trial.create_trial(
        params={"batch_size": 32}, distributions={"batch_size": CategoricalDistribution([32, 64])}, values=[900.0, 0.97],
        user_attrs={"outcome": "ok", "metrics": {"throughput_samples_per_s": 900.0, "val_accuracy": 0.97}}))
    with pytest.raises(BadInput, match="--where must name a metric the study's trials report; got 'val_acuracy'; "
                                       "fix: --where with 'val_accuracy'"):
        choose(study, None, None, ["val_acuracy >= 0.97"])
    with pytest.raises(BadInput, match="got 'throughput_sample_per_s'; fix: --best with 'throughput_samples_per_s'"):
        choose(study, "throughput_sample_per_s", None, [])
    assert choose(study, None, None, ["val_accuracy >= 0.9"])["trials"] == [0]

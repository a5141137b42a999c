"""The command line before Hydra starts: numeric settings checked against their
rules, and the old Optuna sweeper plugin's `hydra.sweeper.params.X=...` form
read as the same search space as `X=...`."""
from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from conftest import run_search
from search.errors import BadInput
from search.paths import conf_dir
from search.commands.precheck import check_command_line
from search.sweep.settings import RULES, check_config
from search.sweep.space import build_space, parse_overrides

# One value that breaks each rule, and one that breaks its type where the rule allows it.
BAD = {
    "hydra.sweeper.n_trials": [0, 2.5, True],
    "hydra.sweeper.n_jobs": [0, "two"],
    "hydra.sweeper.accuracy_tolerance": [-0.1, 0.99, 1.0],  # 0.99: "keep 99%" read as points
    "hydra.sweeper.baseline_repeats": [-1],
    "hydra.sweeper.confirm_budget": [1.5],
    "hydra.sweeper.confirm_candidates": [0],
    "hydra.sweeper.confirm_undecided_rounds": [-1, 1.5],
    "hydra.sweeper.search_for": ["pareto", 1],
    "hydra.sweeper.start_design": ["random", 0],
    "hydra.sweeper.patience_trials": [0, 1.5],
    "hydra.sweeper.seed": [-1, 1.5, 2**32],
    "hydra.sweeper.slots": [0, "many"],
    "hydra.sweeper.trials_per_gpu": [0],
    "hydra.sweeper.max_retries": [-1],
    "hydra.sweeper.stale_after_s": [0, 10, "nan"],
    "hydra.sweeper.max_failure_rate": [-1, 1.5, "nan"],
    "hydra.sweeper.failure_min_trials": [0],
    "hydra.sweeper.early_stopping_margin": [1.0, -0.1],
    "hydra.sweeper.early_stopping_startup_trials": [-1],
    "hydra.sweeper.nightly.repeats": [1],
    "hydra.sweeper.nightly.warm_start": [-1],
    "hydra.sweeper.nightly.alpha": [0, 1],
    "hydra.sweeper.nightly.min_drop": [1, -0.5],
    "hydra.sweeper.nightly.max_wall_s": [0, "inf"],
    "trial.timeout_s": [-5, 0, "abc", "inf"],
    "trial.compile_timeout_s": [-1, "abc"],
    "trial.max_memory_bytes": [0, 4e9, "4GB"],
    "trial.optuna_trial_number": [-1],
}
CASES = [(path, value) for path, values in BAD.items() for value in values]


def test_every_rule_has_bad_values_here() -> None:
    assert set(BAD) == set(RULES)


@pytest.mark.parametrize("path, value", CASES, ids=[f"{p}={v}" for p, v in CASES])
def test_a_bad_numeric_setting_is_one_line_naming_setting_value_rule_and_fix(path: str, value) -> None:
    with pytest.raises(BadInput) as err:
        check_command_line([f"{path}={value}"])
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path} must be {RULES[path][0]}; got ") and f"; fix: {path}=" in line


@pytest.mark.parametrize("path", sorted(RULES))
def test_the_fix_each_rule_suggests_is_accepted(path: str) -> None:
    check_command_line([f"{path}={RULES[path][2]}"])


def test_a_setting_composed_from_a_config_is_checked_too() -> None:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("nightly", overrides=["hydra.sweeper.nightly={repeats:1}"], return_hydra_config=True)
    with pytest.raises(BadInput, match=r"hydra.sweeper.nightly.repeats must be an int >= 2 .*; got 1;"):
        check_config(cfg, "hydra.sweeper")
    with pytest.raises(BadInput, match="trial.timeout_s must be a number of seconds > 0; got -5"):
        check_command_line(["trial={timeout_s:-5}"])


def test_a_sweep_over_another_hydra_setting_is_one_line() -> None:
    with pytest.raises(BadInput, match="a hydra setting takes one value; got hydra.sweeper.n_trials=1,2; fix"):
        check_command_line(["hydra.sweeper.n_trials=1,2"])


def space_of(args: list[str]):
    """What the sweeper builds from a command line: Hydra hands it hydra.sweeper.params
    from the composed config and the command line's own (non-hydra) overrides."""
    overrides = parse_overrides(check_command_line(args))
    fixed = [o.input_line for o in overrides if not o.is_sweep_override()]
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("config", overrides=fixed, return_hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.sweeper, resolve=False)["params"]
    return build_space(params, [o.input_line for o in overrides if not o.is_hydra_override()])


FORMS = [
    ("batch_size=choice(32,64)", "hydra.sweeper.params.batch_size=choice(32,64)",
     "hydra.sweeper.params.batch_size='choice(32,64)'"),
    ("batch_size=32,64", "hydra.sweeper.params.batch_size=32,64", "hydra.sweeper.params.batch_size='32,64'"),
    ("optim.lr=tag(log, interval(1e-4, 1e-1))", "hydra.sweeper.params.optim.lr=tag(log, interval(1e-4, 1e-1))",
     "+hydra.sweeper.params.optim.lr='tag(log, interval(1e-4, 1e-1))'"),  # quoted by hand, a new key needs +
    ("""precision=choice('fp32',"bf16")""", """hydra.sweeper.params.precision=choice('fp32',"bf16")""",
     """hydra.sweeper.params.precision='choice(\\'fp32\\',"bf16")'"""),
]


@pytest.mark.parametrize("plain, params_form, quoted_form", FORMS, ids=[f[0] for f in FORMS])
def test_the_old_plugins_params_form_gives_the_same_space(plain: str, params_form: str, quoted_form: str) -> None:
    expected = space_of([plain])
    assert space_of([params_form]) == expected
    assert space_of([quoted_form]) == expected


@pytest.mark.slow
def test_a_sweep_takes_the_params_form_from_the_command_line(workdir: Path) -> None:
    result = run_search("multirun", "hydra.sweeper.params.batch_size=choice(32,64)", "hydra.sweeper.n_trials=1",
                        "train.budget_samples=256", "train.warmup_steps=1", "train.window_steps=2",
                        cwd=workdir, timeout_s=300)
    assert result.returncode == 0, result.stderr[-2000:]
    storage = JournalStorage(JournalFileBackend(str(workdir / "optuna.journal")))
    [trial] = optuna.load_study(study_name="digits", storage=storage).trials
    assert trial.distributions["batch_size"] == CategoricalDistribution([32, 64])


def test_multirun_shows_configurations_as_hydra_flags_ask(workdir: Path) -> None:
    """`multirun --cfg job` (the usage's own example) and `--info defaults` (the fix the precheck suggests)
    ended in Hydra's traceback: Hydra takes --cfg or --info, or --multirun, not both."""
    job = run_search("multirun", "--cfg", "job", "batch_size=choice(32,64)", "precision=bf16", cwd=workdir)
    assert job.returncode == 0, job.stderr[-2000:]
    assert OmegaConf.create(job.stdout).precision == "bf16"  # the baseline's configuration
    space = run_search("multirun", "--cfg", "hydra", "batch_size=choice(32,64)", cwd=workdir)
    assert space.returncode == 0, space.stderr[-2000:]
    assert OmegaConf.create(space.stdout).hydra.sweeper.params.batch_size == "choice(32,64)"
    info = run_search("multirun", "--info", "defaults", cwd=workdir)
    assert info.returncode == 0 and "search/default" in info.stdout, info.stderr[-2000:]
    nightly = run_search("nightly", "--cfg", "job", cwd=workdir)
    assert nightly.returncode == 0 and "batch_size:" in nightly.stdout, nightly.stderr[-2000:]
    assert not list(workdir.glob("multirun")) and not (workdir / "optuna.journal").exists()  # nothing swept


def test_scoring_gpu_energy_with_trials_sharing_a_gpu_is_refused_before_anything_exists(tmp_path: Path) -> None:
    """A trial that shared its GPU gets no energy, power or utilisation (search/measure/gpu_sharing.py): scoring one
    of them with trials_per_gpu=2 would leave nearly every trial without it."""
    result = run_search("multirun", "hydra.sweeper.trials_per_gpu=2",
                        "hydra.sweeper.constraints=['energy_j_per_sample <= 2']", cwd=tmp_path)
    [line] = [x for x in result.stderr.splitlines() if x.startswith("search: error: ")]
    assert result.returncode == 2 and "trials_per_gpu must be 1 when the sweep scores energy_j_per_sample" in line
    assert line.endswith("; fix: hydra.sweeper.trials_per_gpu=1") and list(tmp_path.iterdir()) == []

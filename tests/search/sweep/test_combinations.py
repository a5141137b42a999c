"""The knobs' rules applied to the space before sampling: values no combination lets run leave the
space, pairs that break a rule together are never proposed, each said once."""
from __future__ import annotations

import random

import optuna
import pytest
from optuna.distributions import CategoricalDistribution

from objectives import Hardware, TrialConfig
from objectives.config import parse_values
from search.errors import BadInput
from search.sweep.combinations import fit_to_rules
from search.sweep.no_repeat import ask_unseen
from search.sweep.rule_sampler import RuleAwareSampler, within_rules
from search.sweep.space import build_space

TWO_CORES = Hardware(cpu_cores=2, why_no_gpu="none here")
HOPPER = Hardware(cpu_cores=8, gpu_count=1, compute_capability=(9, 0), cusparselt=True, torchao=True)


def fit(arguments: list[str], hw: Hardware, fixed: dict | None = None):
    return fit_to_rules(build_space({}, arguments), parse_values(fixed or {}), hw)


def test_ranks_times_threads_past_the_cores_is_a_forbidden_pair_not_a_removed_value() -> None:
    space, notes = fit(["parallel.devices=choice(1,2)", "parallel.threads=choice(1,2)"], TWO_CORES)
    assert space.distributions["parallel.devices"] == CategoricalDistribution([1, 2])
    assert space.distributions["parallel.threads"] == CategoricalDistribution([1, 2])
    assert len(notes) == 1 and notes[0].startswith(
        "never proposed together, they break a rule here: parallel.devices=2 with parallel.threads=2 "
        "(parallel.devices * parallel.threads must be <= the CPU cores available (2)")
    assert space.broken_rule({"parallel.devices": 2, "parallel.threads": 2}) is not None
    assert space.broken_rule({"parallel.devices": 2, "parallel.threads": 1}) is None
    assert space.broken_rule({"parallel.devices": 2}) is None  # threads still open: 1 fits


def test_a_value_no_combination_can_run_leaves_the_space() -> None:
    space, notes = fit(["parallel.devices=choice(1,2,4)", "parallel.threads=choice(1,2)",
                        "precision=choice(fp32,bf16,fp16)"], TWO_CORES)
    assert space.distributions["parallel.devices"] == CategoricalDistribution([1, 2])
    assert space.distributions["precision"] == CategoricalDistribution(["fp32", "bf16"])
    assert notes[0].startswith("removed from the search space, this machine cannot run them: parallel.devices=4 (")
    assert "precision=fp16 (precision=fp16 needs a CUDA GPU; got no usable GPU (none here)" in notes[0]


def test_combination_rules_with_a_fixed_value_remove_and_between_swept_values_forbid() -> None:
    space, notes = fit(["precision=choice(bf16,fp8)"], HOPPER, {"parallel": {"compile": "none"}})
    assert space.distributions["precision"] == CategoricalDistribution(["bf16"])
    assert notes == ["removed from the search space, they break a rule with a fixed value: precision=fp8 "
                     "(parallel.compile must not be none with precision=fp8 (torchao's float8 casts are fast only "
                     "when compiled; eager fp8 is slower than bf16); got parallel.compile=none; "
                     "fix: parallel.compile=default)"]
    space, notes = fit(["precision=choice(fp32,bf16,fp8)", "parallel.compile=choice(none,default)",
                        "model_pruning.method=choice(structured,'2:4')", "model_pruning.ratio=choice(0.0,0.5)"], HOPPER)
    assert all(len(d.choices) == 2 or k == "precision" for k, d in space.distributions.items())
    assert "precision=fp8 with parallel.compile=none" in notes[0]
    assert space.broken_rule({"precision": "fp32", "model_pruning.method": "2:4", "model_pruning.ratio": 0.5})
    assert space.broken_rule({"precision": "bf16", "model_pruning.method": "2:4", "model_pruning.ratio": 0.5,
                              "parallel.compile": "none"}) is None


def test_the_fixed_settings_breaking_a_rule_is_bad_input() -> None:
    with pytest.raises(BadInput, match=r"^this machine cannot run the fixed settings: precision=fp16 needs a CUDA GPU"):
        fit(["batch_size=choice(32,64)"], TWO_CORES, {"precision": "fp16"})
    with pytest.raises(BadInput, match=r"^the fixed settings break a rule: parallel.compile must not be none"):
        fit(["batch_size=choice(32,64)"], HOPPER, {"precision": "fp8"})
    # This machine's check first: the rule's fix (compile) would not make fp8 run on a CPU.
    with pytest.raises(BadInput, match=r"^this machine cannot run the fixed settings: precision=fp8 needs"):
        fit(["batch_size=choice(32,64)"], TWO_CORES, {"precision": "fp8"})
    with pytest.raises(BadInput, match="parallel.devices has no value this machine and the fixed settings allow"):
        fit(["parallel.devices=choice(2,4)"], TWO_CORES, {"parallel": {"threads": 2}})


@pytest.mark.parametrize("make", [
    lambda: optuna.samplers.TPESampler(seed=1, multivariate=True, n_startup_trials=3),
    lambda: optuna.samplers.GPSampler(seed=1, n_startup_trials=3),
    lambda: optuna.samplers.RandomSampler(seed=1),
], ids=["tpe", "gp", "random"])
def test_the_sampler_never_proposes_a_forbidden_pair(make) -> None:
    space, _ = fit(["parallel.devices=choice(1,2)", "parallel.threads=choice(1,2)", "batch_size=choice(32,64)"],
                   TWO_CORES)
    study = optuna.create_study(sampler=within_rules(make(), space.forbids, seed=0))
    seen = []
    for _ in range(12):
        trial = ask_unseen(study, space.distributions, random.Random(0), space.forbids)
        seen.append(trial.params)
        # reward the forbidden corner, so a model-based sampler keeps proposing it
        study.tell(trial, trial.params["parallel.devices"] * trial.params["parallel.threads"]
                   + trial.params["batch_size"] / 64)
    assert all(space.broken_rule(p) is None for p in seen), seen
    assert {(p["parallel.devices"], p["parallel.threads"]) for p in seen} == {(1, 1), (1, 2), (2, 1)}
    repaired = [t.user_attrs["search.repaired"] for t in study.trials if "search.repaired" in t.user_attrs]
    if not isinstance(study.sampler.base, optuna.samplers.RandomSampler):  # the models asked for the corner
        assert any(r in ("parallel.threads: 2 -> 1", "parallel.devices: 2 -> 1") for r in repaired), repaired
    # the 6 configurations within the rules each ran once before any repeat, and no trial number went to a repeat
    assert len({tuple(sorted(p.items())) for p in seen[:6]}) == 6, seen
    assert all(t.state != optuna.trial.TrialState.FAIL for t in study.trials)


def test_the_grid_sampler_stays_itself_and_a_space_without_rules_is_still_kept_from_repeats() -> None:
    random_sampler = optuna.samplers.RandomSampler()
    unruled = within_rules(random_sampler, None)
    assert isinstance(unruled, RuleAwareSampler) and unruled.base is random_sampler
    grid = optuna.samplers.GridSampler({"x": [1, 2]})
    assert within_rules(grid, lambda params: None) is grid
    wrapped = within_rules(random_sampler, lambda params: None)
    assert isinstance(wrapped, RuleAwareSampler) and wrapped.base is random_sampler


def test_the_fixed_base_parses_swept_keys_at_their_defaults() -> None:
    assert parse_values({}) == TrialConfig()


def test_fewer_device_slots_than_gpus_bound_a_trials_ranks_before_the_first_trial() -> None:
    from types import SimpleNamespace

    from search.sweep.planning import _as_trials_see_it

    eight = Hardware(cpu_cores=64, gpu_count=8, compute_capability=(9, 0))
    two_slots, note = _as_trials_see_it(eight, SimpleNamespace(slots=2, trials_per_gpu=1))
    assert two_slots.gpu_count == 2 and "gives trials 2 of the 8 visible GPUs" in note
    space, notes = fit(["parallel.devices=choice(1,2,4)"], two_slots)  # was: 4 started on 2 GPUs, infeasible
    assert space.distributions["parallel.devices"] == CategoricalDistribution([1, 2]) and "devices=4" in notes[0]
    assert _as_trials_see_it(eight, SimpleNamespace(slots="auto", trials_per_gpu=1)) == (eight, None)
    assert _as_trials_see_it(eight, SimpleNamespace(slots=16, trials_per_gpu=2)) == (eight, None)  # 2 per GPU
    assert _as_trials_see_it(TWO_CORES, SimpleNamespace(slots=2, trials_per_gpu=1)) == (TWO_CORES, None)

"""What a practitioner tries first on the hardware at hand (search/sweep/recipe.py)."""
from __future__ import annotations

from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution

from objectives import Hardware
from search.record import RECIPE_ATTR
from search.sweep.recipe import Facts, cpu_has_bf16, enqueue_recipe, facts_here, recipe_params
from search.sweep.roles import enqueued_as_asked
from search.sweep.space import Space

GPU_SPACE = {"batch_size": CategoricalDistribution([8, 16, 32, 64]),
             "precision": CategoricalDistribution(["fp32", "tf32", "bf16", "fp16"]),
             "parallel.compile": CategoricalDistribution(["none", "default", "max-autotune"]),
             "optim.fused": CategoricalDistribution([False, True]),
             "loader.pin_memory": CategoricalDistribution([False, True])}
GPU_BASE = {"batch_size": 16, "precision": "fp32", "parallel.compile": "none", "optim.fused": False,
            "loader.pin_memory": False}
CPU_SPACE = {"parallel.threads": CategoricalDistribution([1, 2, 4, 8]),
             "loader.num_workers": CategoricalDistribution([0, 1, 2]),
             "precision": CategoricalDistribution(["fp32", "bf16"]), "batch_size": CategoricalDistribution([32, 64])}
CPU_BASE = {"parallel.threads": 1, "loader.num_workers": 0, "precision": "fp32", "batch_size": 64}


def test_on_an_ampere_or_later_gpu_bf16_compile_fused_pinned_and_the_largest_batch():
    h100 = Facts(cores=16, gpu="NVIDIA H100", gpu_capability=(9, 0))
    assert recipe_params(h100, GPU_BASE, GPU_SPACE) == {"batch_size": 64, "precision": "bf16",
                                                       "parallel.compile": "default", "optim.fused": True,
                                                       "loader.pin_memory": True}
    v100 = Facts(cores=16, gpu="Tesla V100", gpu_capability=(7, 0))  # no bf16 in hardware: fp16
    assert recipe_params(v100, GPU_BASE, GPU_SPACE)["precision"] == "fp16"
    # only what the space sweeps moves
    assert recipe_params(h100, {"batch_size": 16}, {"batch_size": GPU_SPACE["batch_size"]}) == {"batch_size": 64}


def test_on_a_cpu_its_cores_threads_a_quarter_of_them_as_workers_and_bf16_only_when_native():
    eight = Facts(cores=8)
    assert recipe_params(eight, CPU_BASE, CPU_SPACE) == {**CPU_BASE, "parallel.threads": 8, "loader.num_workers": 2}
    two = Facts(cores=2, cpu_bf16=True)
    assert recipe_params(two, CPU_BASE, CPU_SPACE) == {**CPU_BASE, "parallel.threads": 2, "loader.num_workers": 1,
                                                      "precision": "bf16"}
    six = Facts(cores=6)  # 6 threads are not a choice: the largest at or below them
    assert recipe_params(six, {**CPU_BASE, "parallel.devices": 1}, CPU_SPACE)["parallel.threads"] == 4


def test_the_machine_facts(tmp_path: Path):
    flags = tmp_path / "cpuinfo"
    flags.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile\n")
    assert cpu_has_bf16(str(flags))
    flags.write_text("processor\t: 0\nflags\t\t: fpu sse avx2\n")
    assert not cpu_has_bf16(str(flags)) and not cpu_has_bf16(str(tmp_path / "missing"))
    gpu = facts_here(Hardware(cpu_cores=16, gpu_count=1, compute_capability=(8, 0)))
    assert gpu.gpu and gpu.gpu_capability == (8, 0) and "compute capability 8.0" in gpu.text()
    assert facts_here(Hardware(cpu_cores=2, why_no_gpu="none")).text().startswith("CPU, 2 cores")


def test_the_recipe_is_one_proposal_and_only_when_it_moves_a_knob_within_the_rules():
    study = optuna.create_study(directions=["maximize", "maximize"])
    space = Space(CPU_SPACE, [])
    params = recipe_params(Facts(cores=2), CPU_BASE, CPU_SPACE)
    line = enqueue_recipe(study, CPU_BASE, params, space, "CPU, 2 cores")
    assert line == "recipe: what a practitioner tries first on CPU, 2 cores: parallel.threads=2, " \
                   "loader.num_workers=1, measured next"
    trial = study.ask(CPU_SPACE)
    assert trial.params == params and trial.user_attrs[RECIPE_ATTR] == "CPU, 2 cores"
    assert not enqueued_as_asked(study, trial)  # early stopping and staging apply, as to any proposal
    assert enqueue_recipe(study, CPU_BASE, CPU_BASE, space, "CPU, 2 cores") is None  # nothing to move
    ruled = Space(CPU_SPACE, [], forbids=lambda p: "too many" if p["parallel.threads"] * 2 > 2 else None)
    assert enqueue_recipe(study, CPU_BASE, params, ruled, "CPU, 2 cores") is None  # it would break a rule

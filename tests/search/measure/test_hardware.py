"""Values the machine cannot run leave the space with a notice (the rules themselves:
tests/search/sweep/test_combinations.py); forcing one is exit status 2 with the reason."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from optuna.distributions import CategoricalDistribution

from conftest import run_search
from search.errors import BadInput
from search.measure.hardware import check_memory_cap

def test_an_address_space_cap_is_refused_where_a_gpu_is_visible() -> None:
    check_memory_cap(None, gpu_count=2)
    check_memory_cap(4 << 30, gpu_count=0)  # a CPU sweep: the cap makes out-of-memory real
    with pytest.raises(BadInput, match=r"^trial.max_memory_bytes must be null on a machine with a GPU \(.*\); got "
                                       r"4294967296 with 2 GPU\(s\) visible; fix: trial.max_memory_bytes=null"):
        check_memory_cap(4 << 30, gpu_count=2)


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_on_a_cpu_machine_gpu_values_are_removed_and_forcing_one_exits_2(workdir: Path) -> None:
    removed = run_search("multirun", "hydra.sweeper.params=null", "precision=choice(fp32,fp16,tf32,fp8)",
                         "model_pruning.method=choice(structured,'2:4')", "model_pruning.ratio=0.5",
                         "framework.cudnn_benchmark=choice(false,true)",
                         "memory.expandable_segments=choice(false,true)",
                         "hydra.sweeper.n_trials=1", "train.budget_samples=200", cwd=workdir)
    assert removed.returncode == 0, removed.stderr[-2000:]
    said = " ".join(removed.stdout.split())  # the note is wrapped at the width
    line = said[said.index("removed from the search space"):].split(" study ")[0]  # up to the next note
    for value in ("precision=fp16", "precision=tf32", "precision=fp8", "model_pruning.method='2:4'",
                  "framework.cudnn_benchmark=true", "memory.expandable_segments=true"):
        assert value in line, (value, line)
    forced = run_search("multirun", "precision=fp16", cwd=workdir / "multirun")
    assert forced.returncode == 2
    assert "this machine cannot run the fixed settings: precision=fp16 needs a CUDA GPU" in forced.stderr
    forced = run_search("multirun", "hydra.sweeper.params=null", "model_pruning.method='2:4'", "model_pruning.ratio=0.5",
                        "precision=bf16", "batch_size=choice(32,64)", cwd=workdir / "multirun")
    assert forced.returncode == 2
    assert "this machine cannot run the fixed settings: model_pruning.method=2:4 needs a CUDA GPU" in forced.stderr


@pytest.mark.slow
def test_the_batch_size_probe_drops_batch_sizes_that_run_out_of_memory(workdir: Path) -> None:
    import optuna
    import psutil

    # a trial child needs less address space than this pytest process; 16384 images x 64 channels x 32 x 32 x 4 B
    # is 4 GiB for the first activation alone, far past the 1 GiB to spare
    cap = psutil.Process().memory_info().vms + 2**30
    run = run_search("multirun", "hydra.sweeper.params=null", "batch_size=choice(32,64,16384)",
                     "objective.channels=[64,128]", "hydra.sweeper.batch_size_probe=true",
                     f"trial.max_memory_bytes={cap}", "hydra.sweeper.n_trials=1", "train.budget_samples=300",
                     cwd=workdir)
    assert run.returncode == 0, run.stderr[-2000:]
    line = next(l for l in run.stdout.splitlines() if l.startswith("batch-size probe:"))
    assert line == ("batch-size probe: largest batch_size that fits is 64 (64: ok, 16384: oom); "
                    "larger values leave the space")
    study = optuna.load_study(study_name="digits", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(workdir / "optuna.journal"))))
    assert study.trials[0].distributions["batch_size"] == CategoricalDistribution([32, 64])

"""What a trial's child process is started with: the allocator's settings
and the CUDA device order in its environment before torch starts CUDA, on
the real CLI and the real forkserver child (this machine has no GPU: what
is checked is the environment torch reads, not a CUDA allocation)."""
from __future__ import annotations

import os
from pathlib import Path

from conftest import REPO, run_search
from objectives.knobs.memory import allocator_conf

TESTS = Path(__file__).resolve().parent
ENV_OBJECTIVE = ["objective=custom", "objective.callable=env_objective:objective"]


def test_allocator_settings_merge_the_knob_into_the_users_own() -> None:
    assert allocator_conf(True, None) == "expandable_segments:True"
    assert allocator_conf(True, "max_split_size_mb:64, expandable_segments:False") == \
        "max_split_size_mb:64,expandable_segments:True"
    assert allocator_conf(False, "expandable_segments:True,garbage_collection_threshold:0.8") == \
        "garbage_collection_threshold:0.8,expandable_segments:False"


def test_the_trial_process_starts_with_expandable_segments_and_the_pci_device_order(workdir: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)]), "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}
    result = run_search("run", *ENV_OBJECTIVE, "memory.expandable_segments=true", cwd=workdir, env=env, timeout_s=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split()[1]: line.split()[3] for line in result.stdout.splitlines()
            if line.startswith("│") and len(line.split()) >= 4}
    assert rows.get("allocator_expandable_segments") == "1", result.stdout
    assert rows.get("allocator_keeps_user_setting") == "1", result.stdout
    assert rows.get("cuda_device_order_pci_bus") == "1", result.stdout

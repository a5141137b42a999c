"""The sweep process imports no torch (seconds of CPU per start); the trials' forkserver does."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import pythonpath

REPO = Path(__file__).resolve().parents[3]

SWEEP_SIDE = """
import sys
import objectives
from objectives.config import parse_config
from objectives.knobs import KNOBS, broken_rules
import search.sweep.sweeper
from search.measure import fingerprint
from search.measure.machine import machine_hardware, removed_values
from search.trial.typed_config import parse_trial
hw = machine_hardware()
removed_values(hw)
facts = fingerprint.collect()
parse_trial({})
print(facts["torch_version"], "torch" in sys.modules)
"""


def test_the_sweep_side_reads_configs_rules_hardware_and_fingerprint_without_torch():
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    out = subprocess.run([sys.executable, "-c", SWEEP_SIDE], env=env, capture_output=True, text=True, check=True)
    import torch

    assert out.stdout.split() == [torch.__version__, "False"], out.stdout + out.stderr


def test_the_version_file_says_what_torch_says():
    import torch

    from search.measure.torch_build import torch_build

    build = torch_build()
    assert build is not None and (build.version, build.cuda) == (str(torch.__version__), torch.version.cuda)

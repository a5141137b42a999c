"""Which workload ``objective.name`` trains: one builder per name, all returning a Workload.

``custom`` with ``objective.callable`` never gets here: it trains nothing of
ours (run.py hands it straight to the user's function).
"""

from __future__ import annotations

from objectives.config import CustomConfig, DigitsConfig, GptConfig, ObjectiveConfig, ResnetConfig
from objectives.custom import custom_workload
from objectives.digits import digits_workload
from objectives.gpt import gpt_workload
from objectives.resnet import resnet_workload
from objectives.workload import Workload


def build_workload(objective: ObjectiveConfig, eval_batch_size: int) -> Workload:
    """The workload's datasets and model; ``eval_batch_size`` sizes gpt's fixed validation windows."""
    if isinstance(objective, DigitsConfig):
        return digits_workload(objective)
    if isinstance(objective, GptConfig):
        return gpt_workload(objective, eval_batch_size)
    if isinstance(objective, ResnetConfig):
        return resnet_workload(objective)
    if isinstance(objective, CustomConfig):
        return custom_workload(objective)
    raise AssertionError(f"no workload for {objective!r}")

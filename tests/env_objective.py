"""A user objective that reports what its trial process was started with:
test support, not a product objective.

Used through the product's user-objective path
(``objective=custom objective.callable=env_objective:objective``) in a
trial's real child process. Each metric is 1.0 when the child saw the
setting and 0.0 otherwise: the caching allocator's settings as torch itself
read them (expandable segments and a user's own setting kept beside it),
and the CUDA device order the sweep pins for its children.
"""
from __future__ import annotations

import os
from typing import Any

import torch


def objective(cfg: dict[str, Any]) -> dict[str, float]:
    settings = torch._C._accelerator_getAllocatorSettings()  # what the allocator read from its variable
    return {
        "allocator_expandable_segments": float("expandable_segments:True" in settings),
        "allocator_keeps_user_setting": float("max_split_size_mb:64" in settings),
        "cuda_device_order_pci_bus": float(os.environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"),
    }

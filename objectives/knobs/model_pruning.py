"""Model pruning: make the network smaller before training, for real or by masks.

``structured`` removes whole conv channels with torch-pruning (L1 magnitude),
so the model really has fewer parameters and FLOPs and runs faster; the
classifier head is left alone because its outputs are the classes.
``unstructured`` zeroes the smallest-magnitude weights globally with
``torch.nn.utils.prune``: same shapes and speed on dense kernels, fewer
nonzeros. The masks stay attached during training (so the optimizer cannot
revive pruned weights) and are made permanent by ``finalize_model_pruning``.
"""

from __future__ import annotations

import torch
import torch.nn.utils.prune as prune
import torch_pruning as tp
from torch import nn

from objectives.config import ModelPruningConfig


def _prunable(model: nn.Module) -> list[tuple[nn.Module, str]]:
    return [(m, "weight") for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]


def apply_model_pruning(
    cfg: ModelPruningConfig, model: nn.Module, example_input: torch.Tensor, head: nn.Module
) -> nn.Module:
    """Prune ``cfg.ratio`` of the model in place, by ``cfg.method``; ratio 0 is a no-op."""
    if cfg.ratio == 0:
        return model
    if cfg.method == "structured":
        pruner = tp.pruner.MagnitudePruner(
            model,
            example_input,
            importance=tp.importance.MagnitudeImportance(p=1),
            pruning_ratio=cfg.ratio,
            ignored_layers=[head],
        )
        pruner.step()
    else:
        prune.global_unstructured(_prunable(model), pruning_method=prune.L1Unstructured, amount=cfg.ratio)
    return model


def finalize_model_pruning(model: nn.Module) -> nn.Module:
    """Fold unstructured masks into the weights, leaving plain parameters with zeros."""
    for module in model.modules():
        if prune.is_pruned(module) and hasattr(module, "weight_orig"):
            prune.remove(module, "weight")
    return model

"""Model pruning: make the network smaller before training, for real or by masks.

``structured`` removes whole conv channels with torch-pruning (L1 magnitude),
so the model really has fewer parameters and FLOPs and runs faster; the
layers the workload names are left alone (the classifier head, whose
outputs are the classes; for gpt everything but the MLP hidden channels).
``unstructured`` zeroes the smallest-magnitude weights globally with
``torch.nn.utils.prune``: same shapes and speed on dense kernels, fewer
nonzeros. The masks stay attached during training (so the optimizer cannot
revive pruned weights) and are made permanent by ``finalize_model_pruning``.

A model with nothing the method can prune is not an error but a knob that
did not apply, which ``model_pruning_skip_reason`` says before anything runs.
"""

from __future__ import annotations

import torch
import torch.nn.utils.prune as prune
import torch_pruning as tp
from torch import nn

from objectives.config import ModelPruningConfig


_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def _prunable(model: nn.Module) -> list[tuple[nn.Module, str]]:
    return [(m, "weight") for m in model.modules() if isinstance(m, _LAYERS)]


def model_pruning_skip_reason(cfg: ModelPruningConfig, model: nn.Module, ignored_layers: list[nn.Module]) -> str:
    """Why the knob cannot apply to this model ("" when it can, or when the ratio is 0)."""
    if cfg.ratio == 0:
        return ""
    layers = [m for m, _ in _prunable(model)]
    if cfg.method == "structured":
        layers = [m for m in layers if all(m is not keep for keep in ignored_layers)]
        if not layers:
            return "structured: no Conv or Linear layer outside the ones the workload keeps whole (its head)"
    elif not layers:
        return "unstructured: no Conv or Linear layer"
    return ""


def apply_model_pruning(
    cfg: ModelPruningConfig, model: nn.Module, example_input: torch.Tensor, ignored_layers: list[nn.Module]
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
            ignored_layers=ignored_layers,
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

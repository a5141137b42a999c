"""Model pruning: make the network smaller before training, for real or by masks.

``structured`` removes whole conv channels with torch-pruning (L1 magnitude),
so the model really has fewer parameters and FLOPs and runs faster; the
layers the workload names are left alone (the classifier head, whose
outputs are the classes; for gpt everything but the MLP hidden channels).
``unstructured`` zeroes the smallest-magnitude weights globally with
``torch.nn.utils.prune``: same shapes and speed on dense kernels, fewer
nonzeros. The masks stay attached during training (so the optimizer cannot
revive pruned weights) and are made permanent by ``finalize_model_pruning``.
``2:4`` is semi-structured sparsity for NVIDIA's sparse tensor cores
(compute capability 8.0+, fp16/bf16): the Linear layers outside the kept
ones are swapped for torchao's ``SemiSparseLinear``, which keeps two of
every four weights (by magnitude, at run time) and multiplies with the
sparse kernels in forward and backward; the ratio is one half by definition.

A model with nothing the method can prune is not an error but a knob that
did not apply, which ``model_pruning_skip_reason`` says before anything runs.
"""

from __future__ import annotations

import torch
import torch.nn.utils.prune as prune
import torch_pruning as tp
from torch import nn

from objectives.config import ConfigError, ModelPruningConfig


_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def _prunable(model: nn.Module) -> list[tuple[nn.Module, str]]:
    return [(m, "weight") for m in model.modules() if isinstance(m, _LAYERS)]


def check_model_pruning(cfg: ModelPruningConfig, precision: str, device_type: str) -> None:
    """2:4 needs sparse tensor cores, half precision and torchao; refused before any work starts."""
    if cfg.method != "2:4" or cfg.ratio == 0:
        return
    if device_type != "cuda":
        raise ConfigError(
            f"model_pruning.method 2:4 needs a CUDA GPU with compute capability 8.0 or later; got device "
            f"{device_type!r}; fix: model_pruning.method=structured"
        )
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < (8, 0):
        raise ConfigError(
            f"model_pruning.method 2:4 needs compute capability 8.0 or later; got {major}.{minor}; "
            "fix: model_pruning.method=structured"
        )
    if precision not in ("bf16", "fp16"):
        raise ConfigError(
            f"model_pruning.method 2:4 runs on fp16/bf16 sparse kernels; got precision={precision}; fix: precision=bf16"
        )
    try:
        import torchao.sparsity.training  # noqa: F401
    except ImportError:
        raise ConfigError("model_pruning.method 2:4 needs torchao; got none installed; fix: pip install torchao") from None


def _semi_sparse_eligible(module: nn.Module, ignored_layers: list[nn.Module]) -> bool:
    # cuSPARSELt/CUTLASS want both dimensions in multiples of 64 for half precision
    return (isinstance(module, nn.Linear) and all(module is not keep for keep in ignored_layers)
            and module.in_features % 64 == 0 and module.out_features % 64 == 0)


def model_pruning_skip_reason(cfg: ModelPruningConfig, model: nn.Module, ignored_layers: list[nn.Module]) -> str:
    """Why the knob cannot apply to this model ("" when it can, or when the ratio is 0)."""
    if cfg.ratio == 0:
        return ""
    layers = [m for m, _ in _prunable(model)]
    if cfg.method == "structured":
        layers = [m for m in layers if all(m is not keep for keep in ignored_layers)]
        if not layers:
            return "structured: no Conv or Linear layer outside the ones the workload keeps whole (its head)"
    elif cfg.method == "2:4":
        if not any(_semi_sparse_eligible(m, ignored_layers) for m in model.modules()):
            return "2:4: no Linear layer with both dimensions a multiple of 64 outside the kept ones"
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
    elif cfg.method == "2:4":
        from torchao.sparsity.training import SemiSparseLinear, swap_linear_with_semi_sparse_linear

        names = {name: SemiSparseLinear for name, m in model.named_modules() if _semi_sparse_eligible(m, ignored_layers)}
        swap_linear_with_semi_sparse_linear(model, names)
    else:
        prune.global_unstructured(_prunable(model), pruning_method=prune.L1Unstructured, amount=cfg.ratio)
    return model


def finalize_model_pruning(model: nn.Module) -> nn.Module:
    """Fold unstructured masks into the weights, leaving plain parameters with zeros."""
    for module in model.modules():
        if prune.is_pruned(module) and hasattr(module, "weight_orig"):
            prune.remove(module, "weight")
    return model

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
(compute capability 8.0+, cuSPARSELt, fp16/bf16 only: a config rule ties it
to precision bf16 or fp16): the eligible Linear layers are swapped for
``AutocastSemiSparseLinear`` (objectives/knobs/semi_sparse.py), which keeps
two of every four weights of a row of the half-precision copy of the weight
(by magnitude, every step) and multiplies with the sparse kernel in forward
(backward dense); the ratio is one half by definition. Eligible means both
weight dimensions a multiple of 128 and not in the workload's
``semi_sparse_kept``: the model's first and
last layers and its head, where sparsity costs the most accuracy for the least time saved.
The swap changes no shape, so FLOPs are counted on the dense model before it
(the sparse kernels have no CPU version to count them with).

A model with nothing the method can prune is not an error but a knob that
did not apply, which ``model_pruning_skip_reason`` says before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from objectives.config_check import CombinationError, HardwareError
from objectives.hardware import Hardware
from objectives.knobs.knob import Knob

if TYPE_CHECKING:
    import torch
    from torch import nn

    from objectives.config import TrialConfig
    from objectives.workload import Workload

MODEL_PRUNING_METHODS = ("structured", "unstructured", "2:4")


@dataclass
class ModelPruningConfig:
    """The ``model_pruning`` section."""

    ratio: float = 0.0
    """Fraction of channels (structured) or weights (unstructured) removed, in [0, 0.9]; 2:4 takes 0.5; 0 is off."""
    method: str = "structured"
    """structured (torch-pruning) | unstructured (L1 masks made permanent) | 2:4 (semi-structured, sm_80+)."""


def _prunable(model: nn.Module) -> list[tuple[nn.Module, str]]:
    from torch import nn

    layers = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
    return [(m, "weight") for m in model.modules() if isinstance(m, layers)]


SEMI_SPARSE_MULTIPLE = 128  # cuSPARSELt's tile metadata: rows and columns in multiples of 128


def check_hardware(cfg: ModelPruningConfig, hw: Hardware) -> None:
    """2:4 needs sparse tensor cores (compute capability 8.0), cuSPARSELt and torchao.

    Its precision rule (bf16 or fp16) holds on any machine: ``check_combinations``.
    """
    if cfg.method != "2:4" or cfg.ratio == 0:
        return
    fields = ("model_pruning.method", "model_pruning.ratio")
    if not hw.capability_at_least(8, 0):
        raise HardwareError(f"model_pruning.method=2:4 needs a CUDA GPU with compute capability 8.0 or later "
                            f"(sparse tensor cores); got {hw.shown_capability()}; fix: model_pruning.method=structured",
                            fields)
    if not hw.cusparselt:
        raise HardwareError("model_pruning.method=2:4 needs cuSPARSELt; got a torch build without it; "
                            "fix: model_pruning.method=structured or install a CUDA build of torch", fields)
    if not hw.torchao:
        raise HardwareError("model_pruning.method=2:4 needs torchao; got none installed; "
                            "fix: pip install 'torchao>=0.18' or model_pruning.method=structured", fields)


def check_combinations(cfg: TrialConfig) -> None:
    mp = cfg.model_pruning
    if mp.method == "2:4" and mp.ratio not in (0.0, 0.5):
        raise CombinationError(
            f"model_pruning.ratio must be 0 or 0.5 with model_pruning.method=2:4 (two of every four weights); "
            f"got {mp.ratio}; fix: model_pruning.ratio=0.5",
            ("model_pruning.method", "model_pruning.ratio"),
        )
    if mp.method == "2:4" and mp.ratio > 0 and cfg.precision not in ("bf16", "fp16"):
        raise CombinationError(
            f"precision must be bf16 or fp16 with model_pruning.method=2:4 (the 2:4 sparse kernels take half "
            f"precision only); got precision={cfg.precision}; fix: precision=bf16",
            ("precision", "model_pruning.method", "model_pruning.ratio"),
        )


def layers_kept(cfg: ModelPruningConfig, work: Workload) -> list[nn.Module]:
    """The layers this method leaves whole: 2:4's own list, else the workload's structured-pruning list."""
    if cfg.method != "2:4":
        return work.model_pruning_ignored
    if work.semi_sparse_kept is not None:
        return work.semi_sparse_kept
    from torch import nn

    linears = [m for m in work.model.modules() if isinstance(m, nn.Linear)]
    return linears[:1] + linears[-1:]  # the model's first layer and its head


def _semi_sparse_eligible(module: nn.Module, kept: list[nn.Module]) -> bool:
    from torch import nn

    return (isinstance(module, nn.Linear) and all(module is not keep for keep in kept)
            and module.in_features % SEMI_SPARSE_MULTIPLE == 0 and module.out_features % SEMI_SPARSE_MULTIPLE == 0)


def semi_sparse_layer_names(model: nn.Module, kept: list[nn.Module]) -> list[str]:
    """The Linear layers 2:4 swaps, by qualified name, in module order."""
    return [name for name, m in model.named_modules() if _semi_sparse_eligible(m, kept)]


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
        if not semi_sparse_layer_names(model, ignored_layers):
            return (f"2:4: no Linear layer with both dimensions a multiple of {SEMI_SPARSE_MULTIPLE} outside the "
                    "kept ones (first and last layers, head)")
    elif not layers:
        return "unstructured: no Conv or Linear layer"
    return ""


def apply_model_pruning(
    cfg: ModelPruningConfig, model: nn.Module, example_input: torch.Tensor, ignored_layers: list[nn.Module]
) -> nn.Module:
    """Prune ``cfg.ratio`` of the model in place, by ``cfg.method``; ratio 0 is a no-op."""
    if cfg.ratio == 0:
        return model
    from torch.nn.utils import prune

    if cfg.method == "structured":
        import torch_pruning as tp

        pruner = tp.pruner.MagnitudePruner(
            model,
            example_input,
            importance=tp.importance.MagnitudeImportance(p=1),
            pruning_ratio=cfg.ratio,
            ignored_layers=ignored_layers,
        )
        pruner.step()
    elif cfg.method == "2:4":
        from objectives.knobs.semi_sparse import swap_to_semi_sparse

        swap_to_semi_sparse(model, semi_sparse_layer_names(model, ignored_layers))
    else:
        prune.global_unstructured(_prunable(model), pruning_method=prune.L1Unstructured, amount=cfg.ratio)
    return model


@dataclass
class PrunedModel:
    model: nn.Module
    metrics: dict[str, float]  # parameters and forward FLOPs per sample on either side; 2:4's layer count
    semi_sparse_layers: list[str]  # the layers 2:4 swapped, by name ([] for the other methods)
    not_applied: str  # why the knob turned out not to apply ("" when it did)


def counted_example(model: nn.Module, example: torch.Tensor,
                    batch_size: int) -> tuple[torch.Tensor, float, tuple[int, ...] | None]:
    """The example batch the model takes and its forward FLOPs per sample: one sample first (cheap), else the
    sample repeated to the trial's batch size (a model may take only some batch sizes, e.g. multiples of 32),
    its FLOPs divided by that size; said once on stderr. Neither: the error says what was being done. Also the
    output's shape on that example (None: not one tensor)."""
    import sys

    from objectives import measure

    import torch

    try:
        return example, *measure.counted_forward(model, example)
    except (MemoryError, torch.cuda.OutOfMemoryError):  # an outcome of its own (oom), as it is
        raise
    except Exception as err:  # noqa: BLE001 - the user's forward, on a batch it may not take
        first = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
        if batch_size <= example.shape[0]:
            raise RuntimeError(f"counting FLOPs on an example batch of {example.shape[0]} sample(s) of the training "
                               f"set failed ({first}); fix: make the model's forward take a batch of "
                               f"{example.shape[0]}") from err
    batch = example.repeat(batch_size, *([1] * (example.dim() - 1)))
    try:
        flops, shape = measure.counted_forward(model, batch)
    except (MemoryError, torch.cuda.OutOfMemoryError):
        raise
    except Exception as err:  # noqa: BLE001
        raise RuntimeError(f"counting FLOPs on an example batch of 1 sample and of batch_size={batch_size} samples "
                           f"of the training set failed ({first}; then {type(err).__name__}: "
                           f"{' '.join(str(err).split())[:200]}); fix: make the model's forward take a batch of 1 "
                           f"or of batch_size samples") from err
    print(f"note: the model's forward raised on an example batch of 1 sample ({first}); FLOPs are counted, and "
          f"model pruning traced, on an example batch of batch_size={batch_size} samples instead",
          file=sys.stderr, flush=True)
    return batch, flops / batch_size, shape


def prune_and_count(cfg: ModelPruningConfig, work: Workload, applies: bool, batch_size: int = 1) -> PrunedModel:
    """Model pruning on the plain model, with parameter and FLOP counts taken on either side of it.

    2:4 changes no shape and its sparse kernels have no CPU version (the
    counting forward runs before the model moves to its device), so its FLOPs
    are the dense model's, counted before the swap: the work the model
    defines, as MFU wants it, not the half that the sparse tensor cores skip.
    """
    from objectives import measure

    model = work.model
    example, flops, output_shape = counted_example(model, work.example_input, batch_size)
    kept = layers_kept(cfg, work)
    metrics: dict[str, float] = {
        "params_count_before_model_pruning": measure.params_count(model),
        "flops_per_sample_before_model_pruning": flops,
    }
    names = semi_sparse_layer_names(model, kept) if applies and cfg.method == "2:4" and cfg.ratio > 0 else []
    if names:
        metrics["model_pruning_semi_structured_layers"] = len(names)
    if applies:
        model = apply_model_pruning(cfg, model, example, kept)
    metrics["params_count"] = measure.params_count(model)
    if names:
        metrics["flops_per_sample"] = metrics["flops_per_sample_before_model_pruning"]
    else:
        flops, pruned_shape = measure.counted_forward(model, example)
        metrics["flops_per_sample"] = flops / example.shape[0]
        if pruned_shape != output_shape:
            raise RuntimeError(f"model pruning must leave the model's output shape as it is; got {output_shape} "
                               f"before and {pruned_shape} after {cfg.method} model pruning (it cut the output "
                               f"layer: the workload keeps whole {_names(model, kept) or 'no layer'}); fix: "
                               "model_pruning.method=unstructured or model_pruning.ratio=0")
    not_applied = ""
    if applies and cfg.ratio > 0 and cfg.method == "structured":
        if metrics["params_count"] == metrics["params_count_before_model_pruning"]:
            not_applied = "structured: torch-pruning found no channel group to remove"
    return PrunedModel(model, metrics, names, not_applied)


def _names(model: nn.Module, layers: list[nn.Module]) -> str:
    return ", ".join(name for name, m in model.named_modules() if any(m is layer for layer in layers))


def finalize_model_pruning(model: nn.Module) -> nn.Module:
    """Fold unstructured masks into the weights, leaving plain parameters with zeros."""
    from torch.nn.utils import prune

    for module in model.modules():
        if prune.is_pruned(module) and hasattr(module, "weight_orig"):
            prune.remove(module, "weight")
    return model


KNOB = Knob(
    name="model pruning",
    section="model_pruning",
    values="`ratio` in [0, 0.9]; `method` `structured` (torch-pruning, really smaller), `unstructured` (L1 masks), "
           "`2:4` (semi-structured, sm_80+, bf16/fp16, ratio 0.5)",
    acts_on="model",
    config=ModelPruningConfig,
    rules={
        "model_pruning.ratio": ("a float in [0, 0.9]", lambda v: 0 <= v <= 0.9, 0.5),
        "model_pruning.method": (f"one of {', '.join(MODEL_PRUNING_METHODS)}",
                                 lambda v: v in MODEL_PRUNING_METHODS, "structured"),
    },
    check_combinations=check_combinations,
    combination_rules=("model_pruning.method=2:4 needs precision bf16 or fp16 (the sparse kernels take half "
                       "precision only) and model_pruning.ratio 0 or 0.5",),
    check_hardware=check_hardware,
    doctor_values=lambda hw: {"model_pruning.method": list(MODEL_PRUNING_METHODS)},
    company={("model_pruning.method", "2:4"): {"model_pruning.ratio": 0.5, "precision": "bf16"}},
    applies=("prune_and_count",),
)

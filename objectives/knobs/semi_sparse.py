"""The 2:4 layer: each step, the weight is made 2:4 sparse in the dtype the matmul runs in.

torchao's ``SemiSparseLinear`` hands its weight as it is, the fp32 master
weight under autocast, to ``torch._sparse_semi_structured_tile``, whose CUDA
kernel takes fp16 and bf16 only; every mixed-precision forward would fail.
Here the weight is first cast to the autocast dtype, a differentiable cast,
then pruned two-of-four by magnitude and packed for cuSPARSELt by torch's
own ``SparseSemiStructuredTensorCUSPARSELT.prune_dense_static_sort``. Its
backward is a straight-through estimator (the gradient passes unchanged), and
the cast's backward turns that gradient back into fp32 on the master weight,
which the optimizer updates densely: weights pruned this step can come back
the next, as in torchao's and xformers' 2:4 training.

Not torchao's ``semi_structured_sparsify``: it hands the tile kernel's packed
cuSPARSELt data on as the kernel returns it, flat, and torch 2.11's
cuSPARSELt matmul asserts a 2-D (rows x packed columns) operand
(``compressed_A.dim() == 2`` in cuSPARSELtOps.cpp): every forward crashed on
an H100 (torch 2.11, torchao 0.18). torch's own constructor views both
packed tensors as 2-D first.

Only the CUDA kernels are missing on a CPU (the tile kernel has no CPU or
meta implementation), so everything up to them runs and is tested there; the
cuda-marked test in tests/objectives/knobs/test_gpu_paths.py runs the
kernels.

Importing this module imports torchao; model_pruning imports it only when a
trial asks for 2:4.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.sparse import SparseSemiStructuredTensorCUSPARSELT
from torchao.sparsity.training import SemiSparseLinear, swap_linear_with_semi_sparse_linear

SPARSE_KERNEL_DTYPES = (torch.float16, torch.bfloat16)


def weight_in_compute_dtype(weight: torch.Tensor, device_type: str) -> torch.Tensor:
    """The weight cast to autocast's dtype when autocast is on for this device, else as it is."""
    if torch.is_autocast_enabled(device_type):
        return weight.to(torch.get_autocast_dtype(device_type))
    return weight


class _SparsifyStraightThrough(torch.autograd.Function):
    """2:4 by magnitude in 4x4 tiles, packed for cuSPARSELt; the gradient passes through unchanged."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return SparseSemiStructuredTensorCUSPARSELT.prune_dense_static_sort(weight)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad


def sparsify_two_four(weight: torch.Tensor) -> torch.Tensor:
    return _SparsifyStraightThrough.apply(weight)


class AutocastSemiSparseLinear(SemiSparseLinear):
    """torchao's SemiSparseLinear, sparsifying the half-precision copy of its fp32 master weight."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = weight_in_compute_dtype(self.weight, x.device.type)
        if weight.dtype not in SPARSE_KERNEL_DTYPES:
            raise RuntimeError(
                f"2:4 sparse kernels take fp16 or bf16 weights; got {weight.dtype} (precision without autocast); "
                "fix: precision=bf16"
            )
        return F.linear(x, sparsify_two_four(weight), self.bias)


def swap_to_semi_sparse(model: nn.Module, layer_names: list[str]) -> None:
    """Replace the named nn.Linear layers, in place, keeping their parameters."""
    swap_linear_with_semi_sparse_linear(model, {name: AutocastSemiSparseLinear for name in layer_names})

"""The 2:4 layer: each step, the weight is made 2:4 sparse in the dtype the matmul runs in.

torchao's ``SemiSparseLinear`` hands its weight as it is, the fp32 master
weight under autocast, to ``torch._sparse_semi_structured_tile``, whose CUDA
kernel takes fp16 and bf16 only; every mixed-precision forward would fail.
Here the weight is first cast to the autocast dtype, a differentiable cast,
then pruned two-of-four by magnitude and packed for cuSPARSELt by torchao's
``semi_structured_sparsify``. Its backward is a straight-through estimator
(the gradient passes unchanged), and the cast's backward turns that gradient
back into fp32 on the master weight, which the optimizer updates densely:
weights pruned this step can come back the next, as in torchao's and
xformers' 2:4 training.

Only the CUDA kernels are missing on a CPU (the tile kernel has no CPU or
meta implementation), so everything up to them runs and is tested there; the
kernels themselves have not run in this project's tests.

Importing this module imports torchao; model_pruning imports it only when a
trial asks for 2:4.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchao.sparsity.training import SemiSparseLinear, swap_linear_with_semi_sparse_linear
from torchao.sparsity.training.autograd import semi_structured_sparsify
from torch import nn

SPARSE_KERNEL_DTYPES = (torch.float16, torch.bfloat16)


def weight_in_compute_dtype(weight: torch.Tensor, device_type: str) -> torch.Tensor:
    """The weight cast to autocast's dtype when autocast is on for this device, else as it is."""
    if torch.is_autocast_enabled(device_type):
        return weight.to(torch.get_autocast_dtype(device_type))
    return weight


class AutocastSemiSparseLinear(SemiSparseLinear):
    """torchao's SemiSparseLinear, sparsifying the half-precision copy of its fp32 master weight."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = weight_in_compute_dtype(self.weight, x.device.type)
        if weight.dtype not in SPARSE_KERNEL_DTYPES:
            raise RuntimeError(
                f"2:4 sparse kernels take fp16 or bf16 weights; got {weight.dtype} (precision without autocast); "
                "fix: precision=bf16"
            )
        return F.linear(x, semi_structured_sparsify(weight, backend="cusparselt"), self.bias)


def swap_to_semi_sparse(model: nn.Module, layer_names: list[str]) -> None:
    """Replace the named nn.Linear layers, in place, keeping their parameters."""
    swap_linear_with_semi_sparse_linear(model, {name: AutocastSemiSparseLinear for name in layer_names})

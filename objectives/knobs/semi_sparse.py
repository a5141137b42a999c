"""The 2:4 layer: each step, the weight is made 2:4 sparse in the dtype the matmul runs in.

Forward: the fp32 master weight is cast to autocast's dtype (the sparse
kernels take fp16 and bf16 only), the two largest magnitudes of every four
consecutive weights of a row are kept (NVIDIA's 2:4 pattern), and
``torch.sparse.to_sparse_semi_structured`` packs the result with
cuSPARSELt's own compress (``torch._cslt_compress``) for the sparse matmul.
Backward: dense, a straight-through estimator (every weight gets its
gradient, pruned this step or not, as in torchao's and xformers' 2:4
training); the input's gradient uses the pruned weight. The optimizer
updates the fp32 master weight densely, so weights pruned this step can come
back the next. Only the forward matmul is sparse.

What ran on a GPU (an H200, torch 2.11, torchao 0.18, 2026-11-26) and why
this is not torchao's ``SemiSparseLinear``:
- torchao's ``semi_structured_sparsify`` hands the tile kernel's packed data
  on flat, and torch 2.11's cuSPARSELt matmul asserts a 2-D operand
  (``compressed_A.dim() == 2``): every forward crashed.
- torch's ``SparseSemiStructuredTensorCUSPARSELT.prune_dense_static_sort``
  (the same tile kernel, viewed 2-D) ran, but the matrix it multiplied by
  was not the pruned weight: 19,548 of ~32,000 kept values differed from
  the weight's (max 1.47 on weights in [-0.5, 0.5]): a model trained that
  way is not the one it claims to be.
- CUTLASS's 2:4 matmul refuses compute capability 9.0.
This module's path (to_sparse_semi_structured on a pruned weight, dense
backward) ran on an H200 on 2026-11-27 (torch 2.11, torchao 0.18): the
cuda-marked test and the self-test row passed, and gpt2-small in bf16
trained at 105 samples/s against dense bf16's 251 (docs/BENCHMARKS.md):
pruning and packing every weight each step costs more than the sparse
matmul saves. Every process still checks the kernel once before the first
2:4 forward (``check_sparse_matmul``: the identity through the sparse
matmul must give back the pruned weight) and fails the trial with a
one-line reason if it does not; the cuda-marked test in
tests/objectives/knobs/test_gpu_paths.py checks values and gradients
against a dense reference.

On a CPU only the CUDA packing is missing (``to_sparse_semi_structured``
refuses CPU tensors); the tests replace it with the dense pruned weight to
run the rest. Importing this module imports torchao; model_pruning imports
it only when a trial asks for 2:4.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.sparse import to_sparse_semi_structured
from torchao.sparsity.training import SemiSparseLinear, swap_linear_with_semi_sparse_linear

SPARSE_KERNEL_DTYPES = (torch.float16, torch.bfloat16)


def weight_in_compute_dtype(weight: torch.Tensor, device_type: str) -> torch.Tensor:
    """The weight cast to autocast's dtype when autocast is on for this device, else as it is."""
    if torch.is_autocast_enabled(device_type):
        return weight.to(torch.get_autocast_dtype(device_type))
    return weight


def two_four_mask(weight: torch.Tensor) -> torch.Tensor:
    """True at the two largest magnitudes of every four consecutive weights of a row (NVIDIA's 2:4 pattern)."""
    groups = weight.detach().abs().reshape(-1, 4)
    keep = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, groups.topk(2, dim=1).indices, True)
    return keep.reshape(weight.shape)


_CHECKED: set[tuple[str, torch.dtype]] = set()


def check_sparse_matmul(device: torch.device, dtype: torch.dtype) -> None:
    """Once per device and dtype: the identity through the sparse matmul must give back the pruned weight.

    Exact in any precision (each output is one weight times 1); a kernel that multiplies by misplaced
    weights, as torch 2.11's tile-kernel path did on an H200, fails here instead of training a wrong model."""
    if (str(device), dtype) in _CHECKED:
        return
    weight = (torch.rand(128, 128, device=device, generator=torch.Generator(device).manual_seed(0)) - 0.5).to(dtype)
    pruned = weight * two_four_mask(weight)
    with torch.autocast(device.type, enabled=False):
        got = F.linear(torch.eye(128, device=device, dtype=dtype), to_sparse_semi_structured(pruned)).t()
    error = (got.float() - pruned.float()).abs().max().item()
    if not error <= 1e-3:
        raise RuntimeError(f"2:4 model pruning: the sparse matmul on {device} ({dtype}) does not multiply by the "
                           f"pruned weight (max error {error:.3g} on weights in [-0.5, 0.5]; torch {torch.__version__}), "
                           f"so a 2:4 model would train wrong; fix: model_pruning.method=structured")
    _CHECKED.add((str(device), dtype))


class _TwoFourLinear(torch.autograd.Function):
    """y = x @ prune(W).T + b through cuSPARSELt; backward dense, straight through to every weight."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:  # type: ignore[override]
        pruned = weight * two_four_mask(weight)
        ctx.save_for_backward(x, pruned)
        ctx.has_bias = bias is not None
        with torch.autocast(x.device.type, enabled=False):
            return F.linear(x, to_sparse_semi_structured(pruned), bias)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        x, pruned = ctx.saved_tensors
        rows = grad_out.reshape(-1, grad_out.shape[-1])
        grad_x = grad_out @ pruned
        grad_weight = rows.t() @ x.reshape(-1, x.shape[-1])  # straight through: pruned weights get it too
        grad_bias = rows.sum(0) if ctx.has_bias else None
        return grad_x, grad_weight, grad_bias


class AutocastSemiSparseLinear(SemiSparseLinear):
    """torchao's SemiSparseLinear, sparsifying the half-precision copy of its fp32 master weight."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = weight_in_compute_dtype(self.weight, x.device.type)
        if weight.dtype not in SPARSE_KERNEL_DTYPES:
            raise RuntimeError(
                f"2:4 sparse kernels take fp16 or bf16 weights; got {weight.dtype} (precision without autocast); "
                "fix: precision=bf16"
            )
        check_sparse_matmul(x.device, weight.dtype)
        bias = None if self.bias is None else self.bias.to(weight.dtype)
        return _TwoFourLinear.apply(x.to(weight.dtype), weight, bias)


def swap_to_semi_sparse(model: nn.Module, layer_names: list[str]) -> None:
    """Replace the named nn.Linear layers, in place, keeping their parameters."""
    swap_linear_with_semi_sparse_linear(model, {name: AutocastSemiSparseLinear for name in layer_names})

"""Model FLOPs utilisation: the share of the hardware's peak that the model's
own arithmetic achieved.

    MFU = achieved FLOP/s / (peak FLOP/s per GPU * n_gpus)
    achieved FLOP/s = training FLOPs per token (or sample) * tokens (samples) per s

For a transformer, training FLOPs per token = 6N + 12·L·d·T (N parameters,
L layers, d model width, T context length): 6N for the forward and backward
matmuls through the weights, and 12·L·d·T for the attention scores and their
weighted sum, counted as PaLM (Chowdhery et al. 2022, appendix B) does; the
workload reports it (gpt: objectives/gpt.py, `model_flops_per_token`). For
any model whose forward FLOPs were counted (objectives report
`flops_per_sample`, forward only), training is ~3x forward: the backward pass
costs twice the forward. Recomputed activations (checkpointing) are not model
FLOPs and are not counted, which is the point of MFU over HFU.

Peaks are dense (no 2:4 sparsity) tensor-core numbers from NVIDIA's
datasheets; the datasheets print the sparse figure, twice these. fp16 equals
bf16. tf32 is half of bf16. fp32 means no tensor cores (this project's fp32
turns TF32 off). fp8 is left out on purpose: whether a step ran fp8 matmuls
depends on which layers torchao converted, so any single peak would mislead.
"""
from __future__ import annotations

import re
from typing import Mapping

# (name pattern, peak FLOP/s per GPU by precision). First match wins: the
# specific variants come before the families they belong to.
PEAK_FLOPS_PER_S: list[tuple[str, dict[str, float]]] = [
    (r"\bH100\b.*\bPCIe\b", {"bf16": 756e12, "fp16": 756e12, "tf32": 378e12, "fp32": 51e12}),
    (r"\bH100\b.*\b(SXM|HBM3)", {"bf16": 989e12, "fp16": 989e12, "tf32": 494.5e12, "fp32": 67e12}),
    (r"\bH200\b(?!.*\bNVL\b)", {"bf16": 989e12, "fp16": 989e12, "tf32": 494.5e12, "fp32": 67e12}),
    (r"\bA100\b", {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12}),
    (r"\bL4\b", {"bf16": 121e12, "fp16": 121e12, "tf32": 60e12, "fp32": 30.3e12}),
]


def peak_flops_per_s(device_name: str, precision: str) -> float | None:
    """Dense peak of one GPU at `precision`, or None when unknown (CPU, fp8, a GPU not in the table)."""
    for pattern, peaks in PEAK_FLOPS_PER_S:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return peaks.get(precision)
    return None


def training_flops_from_forward(forward_flops: float) -> float:
    """Forward + backward ~= 3x forward (backward computes gradients for inputs and weights)."""
    return 3 * forward_flops


def mfu(flops_per_unit: float, units_per_s: float, device_name: str, precision: str, n_gpus: int = 1) -> float | None:
    """Fraction of peak, in [0, 1] for a sane measurement; None where no honest peak exists.

    `flops_per_unit` is training FLOPs per token (with `units_per_s` tokens/s)
    or per sample (with samples/s), summed over all `n_gpus` ranks' throughput."""
    peak = peak_flops_per_s(device_name or "", precision)
    if peak is None or n_gpus < 1 or flops_per_unit <= 0 or units_per_s <= 0:
        return None
    return flops_per_unit * units_per_s / (peak * n_gpus)


def trial_mfu(metrics: Mapping[str, float], device_name: str, precision: str, n_gpus: int) -> float | None:
    """MFU of a finished trial: per token when the workload reports its model
    FLOPs per token (transformers), else 3x the counted forward FLOPs per sample."""
    if metrics.get("model_flops_per_token") and metrics.get("throughput_tokens_per_s"):
        return mfu(metrics["model_flops_per_token"], metrics["throughput_tokens_per_s"], device_name, precision, n_gpus)
    forward = metrics.get("flops_per_sample", 0.0)
    return mfu(training_flops_from_forward(forward), metrics.get("throughput_samples_per_s", 0.0), device_name,
               precision, n_gpus)

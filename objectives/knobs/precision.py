"""Numeric precision: autocast dtype, TF32 switches, fp16 loss scaling, fp8 layers.

On a CPU only fp32 and bf16 run (``torch.autocast("cpu", dtype=bfloat16)``);
tf32, fp16 and fp8 are GPU features, and asking for them without CUDA is a
config error with the fix, not a crashed trial. fp32 on CUDA turns TF32 off
explicitly, because cuDNN convolutions default to TF32 and "fp32" must mean
fp32.

fp8 is torchao's float8 training (tensorwise scaling): every nn.Linear whose
two dimensions are multiples of 16 (the fp8 matmul's requirement) becomes a
Float8Linear, under bf16 autocast. Its casts and scales are only fast when
torch.compile fuses them; eager fp8 is slower than bf16, so a config rule
(``check_combinations`` here) refuses fp8 with ``parallel.compile=none``. The trial
reports the converted layers (metric ``fp8_converted_layers``, info
``fp8_converted_layer_names``). The weights' dimensions are not the only
inner dimension: the backward's weight-gradient matmul runs over the batch's
tokens, which batch size and sequence length set, so the layers pad that
dimension to a multiple of 16 when it is not one (torchao's ``pad_inner_dim``;
without it a batch of 189 tokens failed on an H200, and on aligned shapes it
cost nothing measurable: scripts/bench/gpu_fp8_padding.py). The conversion runs
on a CPU (torchao's emulate mode even runs the layers, which is how the tests
check it); the fp8 matmuls need sm_89+ and run in the cuda-marked tests.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from objectives.config_check import CombinationError, HardwareError
from objectives.hardware import Hardware
from objectives.knobs.knob import Knob

if TYPE_CHECKING:
    import torch
    from torch import nn

    from objectives.config import TrialConfig

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
_AUTOCAST_DTYPE = {"fp32": None, "tf32": None, "bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}  # torch.<name>


@dataclass
class PrecisionPlan:
    precision: str
    device_type: str
    autocast_dtype: torch.dtype | None
    grad_scaler: Any = None  # torch.amp.GradScaler for fp16, else None
    fp8_converted_layers: list[str] = field(default_factory=list)  # qualified names, in module order

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        import torch

        return torch.autocast(self.device_type, dtype=self.autocast_dtype)


def check_hardware(precision: str, hw: Hardware) -> None:
    """What this machine cannot run. On a CPU, fp32 and bf16 (CPU autocast); on a GPU, bf16 and tf32
    need the tensor cores of compute capability 8.0 (torch.cuda.is_bf16_supported also admits older
    GPUs, which emulate bf16 slowly: a speed sweep would only learn that they are slow), fp8 8.9."""
    def refuse(rule: str, fix: str) -> HardwareError:
        return HardwareError(f"precision={precision} needs {rule}; got {hw.shown_capability()}; fix: {fix}",
                             ("precision",))

    if precision in ("tf32", "fp16", "fp8") and hw.gpu_count == 0:
        raise refuse("a CUDA GPU", "precision=bf16 or precision=fp32")
    if precision == "tf32" and not hw.capability_at_least(8, 0):
        raise refuse("compute capability 8.0 or later (TF32 tensor cores)", "precision=fp32")
    if precision == "bf16" and hw.gpu_count and not hw.capability_at_least(8, 0):
        raise refuse("compute capability 8.0 or later on a GPU (bf16 tensor cores)", "precision=fp16")
    if precision == "fp8" and not hw.capability_at_least(8, 9):
        raise refuse("compute capability 8.9 or later (fp8 tensor cores)", "precision=bf16")
    if precision == "fp8" and not hw.torchao:
        raise HardwareError("precision=fp8 needs torchao; got none installed; "
                            "fix: pip install 'torchao>=0.18' or precision=bf16", ("precision",))


def check_combinations(cfg: TrialConfig) -> None:
    if cfg.precision == "fp8" and cfg.parallel.compile == "none":
        raise CombinationError(
            "parallel.compile must not be none with precision=fp8 (torchao's float8 casts are fast only when "
            "compiled; eager fp8 is slower than bf16); got parallel.compile=none; fix: parallel.compile=default",
            ("precision", "parallel.compile"),
        )


def _fp8_convertible(module: nn.Module, fqn: str) -> bool:
    from torch import nn

    return isinstance(module, nn.Linear) and module.in_features % 16 == 0 and module.out_features % 16 == 0


def convert_to_fp8(model: nn.Module, emulate: bool = False) -> list[str]:
    """Swap the convertible nn.Linear layers for torchao's Float8Linear in place; their names.

    ``emulate`` runs the fp8 casts in plain torch, so the conversion and the
    layers can be checked on a CPU; trials never emulate. ``pad_inner_dim``:
    a batch's token count need not be a multiple of 16 (the module's docstring).
    """
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    from torchao.float8.float8_linear import Float8Linear

    convert: Callable[..., Any] = convert_to_float8_training
    convert(model, module_filter_fn=_fp8_convertible, config=Float8LinearConfig(pad_inner_dim=True, emulate=emulate))
    return [name for name, m in model.named_modules() if isinstance(m, Float8Linear)]


def apply_precision(precision: str, model: nn.Module, device_type: str) -> tuple[nn.Module, PrecisionPlan]:
    """Set global matmul precision, convert layers for fp8, and return the autocast plan.

    Runs after model pruning (torch-pruning needs plain nn.Linear/Conv2d) and
    before DDP (DDP must wrap the final modules); ``check_hardware`` has
    refused what this machine cannot run before any work started.
    """
    import warnings

    import torch

    if device_type == "cuda":
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        if not tf32:  # off on purpose (fp32 is true fp32; tf32 is its own value): Inductor's advice to turn it on
            warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores for float32 matrix multiplication")
    fp8_layers = convert_to_fp8(model) if precision == "fp8" else []
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    dtype = _AUTOCAST_DTYPE[precision]
    return model, PrecisionPlan(precision, device_type, dtype and getattr(torch, dtype), scaler, fp8_layers)


KNOB = Knob(
    name="precision",
    section="precision",
    values="`fp32`, `tf32` (sm_80+), `bf16` (CPU, or sm_80+), `fp16` (+GradScaler), `fp8` (torchao, sm_89+, "
           "needs `parallel.compile`)",
    acts_on="autocast, model",
    rules={"precision": (f"one of {', '.join(PRECISIONS)}", lambda v: v in PRECISIONS, "bf16")},
    check_combinations=check_combinations,
    combination_rules=("precision=fp8 needs parallel.compile other than none (eager fp8 is slower than bf16)",),
    check_hardware=check_hardware,
    doctor_values=lambda hw: {"precision": list(PRECISIONS)},
    company={("precision", "fp8"): {"parallel.compile": "default"}},
    applies=("apply_precision",),
)

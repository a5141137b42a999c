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
(objectives/config.py) refuses fp8 with ``parallel.compile=none``. The trial
reports the converted layers (metric ``fp8_converted_layers``, info
``fp8_converted_layer_names``). The conversion runs on a CPU (torchao's
emulate mode even runs the layers, which is how the tests check it); the fp8
matmuls need sm_89+ and have not run in this project's tests.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from objectives.config import ConfigError

_AUTOCAST_DTYPE = {"fp32": None, "tf32": None, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}


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
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)


def check_precision(precision: str, device_type: str) -> None:
    """Refuse what this hardware cannot run, before any work starts."""
    if precision in ("tf32", "fp16", "fp8") and device_type != "cuda":
        raise ConfigError(
            f"precision {precision} needs a CUDA GPU; got precision={precision!r} on device {device_type!r}; "
            "fix: precision=bf16 or precision=fp32"
        )
    if precision == "fp8":
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) < (8, 9):
            raise ConfigError(
                f"precision fp8 needs compute capability 8.9 or later; got {major}.{minor}; fix: precision=bf16"
            )
        try:
            import torchao.float8  # noqa: F401
        except ImportError:
            raise ConfigError(
                "precision fp8 needs torchao; got no torchao installed; fix: pip install 'torchao>=0.18'"
            ) from None
    if precision == "bf16" and device_type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("precision bf16 needs a GPU with bf16 support; got none; fix: precision=fp16")


def _fp8_convertible(module: nn.Module, fqn: str) -> bool:
    return isinstance(module, nn.Linear) and module.in_features % 16 == 0 and module.out_features % 16 == 0


def convert_to_fp8(model: nn.Module, emulate: bool = False) -> list[str]:
    """Swap the convertible nn.Linear layers for torchao's Float8Linear in place; their names.

    ``emulate`` runs the fp8 casts in plain torch, so the conversion and the
    layers can be checked on a CPU; trials never emulate.
    """
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    from torchao.float8.float8_linear import Float8Linear

    convert: Callable[..., Any] = convert_to_float8_training
    convert(model, module_filter_fn=_fp8_convertible, config=Float8LinearConfig(emulate=emulate))
    return [name for name, m in model.named_modules() if isinstance(m, Float8Linear)]


def apply_precision(precision: str, model: nn.Module, device_type: str) -> tuple[nn.Module, PrecisionPlan]:
    """Set global matmul precision, convert layers for fp8, and return the autocast plan.

    Runs after model pruning (torch-pruning needs plain nn.Linear/Conv2d) and
    before DDP (DDP must wrap the final modules).
    """
    check_precision(precision, device_type)
    if device_type == "cuda":
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    fp8_layers = convert_to_fp8(model) if precision == "fp8" else []
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    return model, PrecisionPlan(precision, device_type, _AUTOCAST_DTYPE[precision], scaler, fp8_layers)

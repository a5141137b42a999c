"""Framework switches for convolutional models: channels_last memory format and cudnn.benchmark.

channels_last stores 4-D activations NHWC, which is what tensor-core and
oneDNN convolutions want; it applies to models whose input is a 4-D image
batch and is a knob that did not apply otherwise. cudnn.benchmark lets cuDNN
time its convolution algorithms on the first batch of each shape and keep the
fastest; it exists only with CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from objectives.hardware import Hardware, require_gpu
from objectives.knobs.knob import Knob

if TYPE_CHECKING:
    import torch
    from torch import nn


@dataclass
class FrameworkConfig:
    """The ``framework`` section."""

    channels_last: bool = False
    """NHWC memory format for 4-D image inputs (conv models)."""
    cudnn_benchmark: bool = False
    """cuDNN times its conv algorithms per shape and keeps the fastest (GPU only)."""


def check_hardware(framework: FrameworkConfig, hw: Hardware) -> None:
    if framework.cudnn_benchmark:
        require_gpu("framework.cudnn_benchmark", "cuDNN", hw)


def channels_last_skip_reason(framework: FrameworkConfig, example_input: torch.Tensor) -> str:
    if framework.channels_last and example_input.dim() != 4:
        return f"channels_last: the input is {example_input.dim()}-D, not a 4-D image batch"
    return ""


def apply_framework(framework: FrameworkConfig, model: nn.Module, device_type: str, applies: bool) -> nn.Module:
    import torch

    if device_type == "cuda":
        torch.backends.cudnn.benchmark = framework.cudnn_benchmark
    if framework.channels_last and applies:
        model = model.to(memory_format=torch.channels_last)
    return model


def input_format(framework: FrameworkConfig, applies: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """What the loop does to each input batch after the copy to the device."""
    import torch

    if framework.channels_last and applies:
        return lambda x: x.contiguous(memory_format=torch.channels_last)
    return lambda x: x


KNOB = Knob(
    name="framework",
    section="framework",
    values="`channels_last`, `cudnn_benchmark` (CUDA)",
    acts_on="model, input",
    config=FrameworkConfig,
    check_hardware=check_hardware,
    doctor_values=lambda hw: {"framework.cudnn_benchmark": [False, True]},
    applies=("apply_framework",),
    speed_only=('framework.channels_last', 'framework.cudnn_benchmark'),
)

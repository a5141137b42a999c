"""The one place that talks to NVML (nvidia-ml-py, `import pynvml`).

Every NVML call in search/ goes through the module attribute `_nvml`, so a
test on a machine without a GPU can put a fake with scripted readings there
and exercise the real sampling and summarising code; nothing else is faked.

NVML, not torch.cuda, answers the GPU questions of the sweep process:
`torch.cuda.is_available()` initialises the CUDA driver, and a process that
has done that cannot hand CUDA to the children it forks later. NVML reads the
driver's management interface and leaves CUDA alone.

Indices are NVML's (PCI bus order). CUDA numbers devices the same way when
CUDA_DEVICE_ORDER=PCI_BUS_ID, and on a box of identical GPUs either way.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pynvml

_nvml: Any = pynvml


def _reason_bit(name: str) -> int:
    """Clock-event bits under the current name, or the older "throttle" name."""
    for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
        if hasattr(pynvml, prefix + name):
            return int(getattr(pynvml, prefix + name))
    raise AttributeError(f"pynvml has no clock-event reason {name}; fix: pip install -U nvidia-ml-py")


# flag -> bits of nvmlDeviceGetCurrentClocksEventReasons that set it
THROTTLE_FLAGS: dict[str, int] = {
    "thermal": _reason_bit("HwThermalSlowdown") | _reason_bit("SwThermalSlowdown"),
    "power_cap": _reason_bit("SwPowerCap"),
    "hw_slowdown": _reason_bit("HwSlowdown") | _reason_bit("HwPowerBrakeSlowdown"),
    "sync_boost": _reason_bit("SyncBoost"),
    "idle": _reason_bit("GpuIdle"),
    "app_clocks": _reason_bit("ApplicationsClocksSetting"),
}

# Readings a GPU may legitimately not offer (energy counter before Volta, clocks
# under some vGPU profiles): that field is None, sampling goes on.
_ABSENT_FIELD_ERRORS = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_NO_PERMISSION", "NVML_ERROR_FUNCTION_NOT_FOUND")


@dataclass
class GpuReading:
    """One GPU at one instant, in the units the names say."""

    index: int
    time_unix_s: float
    util_gpu_percent: float | None
    util_mem_percent: float | None
    mem_used_bytes: float | None
    power_w: float | None
    temp_c: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    throttle: dict[str, bool] | None
    energy_mj: float | None


def start() -> str | None:
    """Initialise NVML; None when GPUs can be read, else why not (one phrase)."""
    try:
        _nvml.nvmlInit()
    except Exception as err:  # NVMLError_LibraryNotFound, DriverNotLoaded, a broken install
        return _reason(err)
    try:
        if _nvml.nvmlDeviceGetCount() < 1:
            _nvml.nvmlShutdown()
            return "no devices"
    except Exception as err:
        stop()
        return _reason(err)
    return None


def stop() -> None:
    try:
        _nvml.nvmlShutdown()
    except Exception:  # already shut down, or the library went away: nothing to release
        pass


def device_count() -> int:
    return int(_nvml.nvmlDeviceGetCount())


def handle(index: int) -> Any:
    return _nvml.nvmlDeviceGetHandleByIndex(index)


def device_name(h: Any) -> str:
    return _text(_nvml.nvmlDeviceGetName(h))


def driver_version() -> str:
    return _text(_nvml.nvmlSystemGetDriverVersion())


def compute_capability(h: Any) -> tuple[int, int]:
    major, minor = _nvml.nvmlDeviceGetCudaComputeCapability(h)
    return int(major), int(minor)


def visible_indices(count: int, cuda_visible_devices: str | None = None) -> list[int]:
    """NVML indices of the GPUs CUDA shows a process with this CUDA_VISIBLE_DEVICES
    (default: this process's own)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if cuda_visible_devices is None else cuda_visible_devices
    if visible is None:
        return list(range(count))
    out: list[int] = []
    for item in visible.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= count:
            break  # CUDA stops at the first invalid entry; UUIDs are not resolved here
        out.append(int(item))
    return out


def read(index: int, h: Any, now_unix_s: float) -> GpuReading:
    """All figures of one GPU. An NVMLError other than "not supported" propagates:
    the caller decides that sampling is over."""
    util = _field(lambda: _nvml.nvmlDeviceGetUtilizationRates(h))
    mem = _field(lambda: _nvml.nvmlDeviceGetMemoryInfo(h))
    power_mw = _field(lambda: _nvml.nvmlDeviceGetPowerUsage(h))
    reasons = _field(lambda: _clock_event_reasons(h))
    return GpuReading(
        index=index,
        time_unix_s=now_unix_s,
        util_gpu_percent=None if util is None else float(util.gpu),
        util_mem_percent=None if util is None else float(util.memory),
        mem_used_bytes=None if mem is None else float(mem.used),
        power_w=None if power_mw is None else power_mw / 1000.0,
        temp_c=_float(_field(lambda: _nvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))),
        sm_clock_mhz=_float(_field(lambda: _nvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))),
        mem_clock_mhz=_float(_field(lambda: _nvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM))),
        throttle=None if reasons is None else decode_throttle(int(reasons)),
        energy_mj=_float(_field(lambda: _nvml.nvmlDeviceGetTotalEnergyConsumption(h))),
    )


def decode_throttle(mask: int) -> dict[str, bool]:
    return {flag: bool(mask & bits) for flag, bits in THROTTLE_FLAGS.items()}


def _clock_event_reasons(h: Any) -> int:
    fn = getattr(_nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if fn is None:  # nvidia-ml-py before 12.535 only has the "throttle" name
        fn = _nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return fn(h)


def _field(call: Any) -> Any:
    try:
        return call()
    except pynvml.NVMLError as err:
        if _error_name(err) in _ABSENT_FIELD_ERRORS:
            return None
        raise


def _error_name(err: Exception) -> str:
    value = getattr(err, "value", None)
    for name in _ABSENT_FIELD_ERRORS:
        if value is not None and value == getattr(pynvml, name, object()):
            return name
    return ""


def _reason(err: Exception) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

"""The one place that talks to NVML (nvidia-ml-py, `import pynvml`).

Every NVML call in search/ goes through the module attribute `_nvml`, so a
test on a machine without a GPU can put a fake with scripted readings there
and exercise the real sampling and summarising code; nothing else is faked.

NVML, not torch.cuda, answers the GPU questions of the sweep process:
`torch.cuda.is_available()` initialises the CUDA driver, and a process that
has done that cannot hand CUDA to the children it forks later. NVML reads the
driver's management interface and leaves CUDA alone.

Indices are NVML's. CUDA_VISIBLE_DEVICES names GPUs the way CUDA does (see
`visible_indices`): its ordinals count GPUs in PCI bus order only under
CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's default is fastest first), which
`pin_cuda_device_order` sets in the sweep process before anything starts,
so that every trial child inherits it and ordinals name the GPU NVML reads.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

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
    power_instant_w: float | None = None  # NVML_FI_DEV_POWER_INSTANT; power_w is a 1 s average on recent GPUs


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


DEVICE_ORDER = "PCI_BUS_ID"


def pin_cuda_device_order(environ: Any = os.environ) -> None:
    """Make CUDA count GPUs in PCI bus order, as NVML does, before anything starts.

    CUDA's default order is fastest first: on a box with two GPU models,
    CUDA_VISIBLE_DEVICES=0 would then be one GPU to the trial and another to
    NVML, and the sweep would sample (and size MFU for) the wrong one. Trial
    children inherit the variable. A user's other explicit order is refused
    rather than overridden: their ordinals mean something else."""
    current = environ.get("CUDA_DEVICE_ORDER", "")
    if current == "":
        environ["CUDA_DEVICE_ORDER"] = DEVICE_ORDER
    elif current != DEVICE_ORDER:
        from search.errors import BadInput

        raise BadInput(f"CUDA_DEVICE_ORDER must be {DEVICE_ORDER} (or unset) so that CUDA's GPU ordinals name the GPUs "
                       f"NVML samples; got {current!r}; fix: unset CUDA_DEVICE_ORDER, and name GPUs in "
                       f"CUDA_VISIBLE_DEVICES by UUID (nvidia-smi -L) if you meant the fastest ones")


@dataclass(frozen=True)
class VisibleGpu:
    """A device CUDA shows a process: the physical GPU's NVML index, and whether
    the device is a MIG instance carved from it rather than the whole GPU."""

    index: int
    mig: bool = False


def visible_gpus(count: int, cuda_visible_devices: str | None = None) -> list[VisibleGpu]:
    """The devices CUDA shows a process with this CUDA_VISIBLE_DEVICES (default:
    this process's own), in CUDA's order. `count` is NVML's device count.

    Each entry is read as CUDA reads it: an ordinal (the k-th GPU by PCI bus,
    which is CUDA's count under CUDA_DEVICE_ORDER=PCI_BUS_ID), a GPU UUID or a
    unique prefix of one (`GPU-8932f937`), or a MIG instance, `MIG-<uuid>` or
    the older `MIG-GPU-<uuid>/<gi>/<ci>`. Like CUDA, the list ends at the
    first entry that names no device. Unset, it shows every GPU in PCI bus
    order (NVML's own index order is not documented to be that order). A GPU
    in MIG mode named by ordinal or GPU UUID is a MIG instance too: CUDA runs
    on one of its instances, never on the whole GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if cuda_visible_devices is None else cuda_visible_devices
    pci_order = sorted(range(count), key=lambda i: _pci_bus_id(handle(i)))
    if visible is None:
        return [VisibleGpu(i, mig=_mig_enabled(i)) for i in pci_order]
    uuids = {i: _text(_nvml.nvmlDeviceGetUUID(handle(i))) for i in range(count)}
    out: list[VisibleGpu] = []
    for item in visible.split(","):
        gpu = _resolve(item.strip(), uuids, pci_order)
        if gpu is None:
            break
        out.append(gpu if gpu.mig or not _mig_enabled(gpu.index) else VisibleGpu(gpu.index, mig=True))
    return out


def _mig_enabled(index: int) -> bool:
    """Whether the GPU is in MIG mode now (a GPU that cannot be, or an older driver: no)."""
    try:
        current, _pending = _nvml.nvmlDeviceGetMigMode(handle(index))
    except (pynvml.NVMLError, AttributeError):  # NOT_SUPPORTED below Ampere; a binding without the call
        return False
    return int(current) == pynvml.NVML_DEVICE_MIG_ENABLE


def visible_indices(count: int, cuda_visible_devices: str | None = None) -> list[int]:
    """NVML indices of the physical GPUs behind `visible_gpus` (a MIG instance: its GPU)."""
    return [gpu.index for gpu in visible_gpus(count, cuda_visible_devices)]


def _resolve(item: str, uuids: dict[int, str], pci_order: list[int]) -> VisibleGpu | None:
    if item.isdigit():
        return VisibleGpu(pci_order[int(item)]) if int(item) < len(pci_order) else None
    if item.upper().startswith("MIG-GPU-"):  # R450/R460 form: MIG-GPU-<uuid>/<gi>/<ci>
        index = _unique_prefix(item[len("MIG-"):].split("/")[0], uuids)
        return None if index is None else VisibleGpu(index, mig=True)
    if item.upper().startswith("MIG-"):
        key = _unique_prefix(item, _mig_uuids(list(uuids)))
        return None if key is None else VisibleGpu(key[0], mig=True)
    if item.upper().startswith("GPU-"):
        index = _unique_prefix(item, uuids)
        return None if index is None else VisibleGpu(index)
    return None


def _pci_bus_id(h: Any) -> tuple[int, int, int]:
    info = _nvml.nvmlDeviceGetPciInfo(h)
    return int(info.domain), int(info.bus), int(info.device)


def _unique_prefix(prefix: str, uuids: Mapping[Any, str]) -> Any:
    """The key whose UUID starts with `prefix`, when exactly one does (CUDA accepts unique prefixes)."""
    keys = [key for key, uuid in uuids.items() if uuid.lower().startswith(prefix.lower())]
    return keys[0] if len(keys) == 1 and len(prefix) > len("GPU-") else None


def _mig_uuids(indices: list[int]) -> dict[tuple[int, int], str]:
    """(GPU index, slot) -> UUID of every MIG instance; a GPU without MIG has none."""
    out: dict[tuple[int, int], str] = {}
    for i in indices:
        h = handle(i)
        try:
            slots = int(_nvml.nvmlDeviceGetMaxMigDeviceCount(h))
        except pynvml.NVMLError:  # not MIG-capable (NOT_SUPPORTED), or an older driver
            continue
        for slot in range(slots):
            try:
                out[(i, slot)] = _text(_nvml.nvmlDeviceGetUUID(_nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)))
            except pynvml.NVMLError:  # NOT_FOUND: no instance in this slot
                continue
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
        power_instant_w=_field(lambda: _instant_power_w(h)),
    )


def _instant_power_w(h: Any) -> float | None:
    """Instant power of the whole GPU (scope 0), from nvmlDeviceGetFieldValues: on Ampere and
    later (but GA100) nvmlDeviceGetPowerUsage is a 1 s average, the field is not. None where the
    driver lacks the field (it answers per field, in the value's nvmlReturn) or the binding the call."""
    get_field_values = getattr(_nvml, "nvmlDeviceGetFieldValues", None)
    if get_field_values is None:
        return None
    value = get_field_values(h, [(pynvml.NVML_FI_DEV_POWER_INSTANT, pynvml.NVML_POWER_SCOPE_GPU)])[0]
    if value.nvmlReturn != pynvml.NVML_SUCCESS:
        return None
    return _FIELD_VALUE[value.valueType](value.value) / 1000.0  # mW


_FIELD_VALUE: dict[int, Any] = {  # nvmlValueType_t -> the union member holding it
    pynvml.NVML_VALUE_TYPE_DOUBLE: lambda v: v.dVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: lambda v: v.uiVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: lambda v: v.ulVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: lambda v: v.ullVal,
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: lambda v: v.sllVal,
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: lambda v: v.siVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: lambda v: v.usVal,
}


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

"""NVML faked at its one seam (search.measure.nvml._nvml) on a machine without a GPU:
scripted readings with pynvml's function names, types and units."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pynvml

FAST_S = 0.02  # sampling interval in these tests; the default is 0.2 s


class FakeNvml:
    """Scripted readings with pynvml's function names, types and units (mW, mJ, MHz)."""

    def __init__(self, gpus: int = 2, power_w: float = 250.0, reasons=lambda n: 0, fail_after: int | None = None,
                 energy_supported: bool = True, names: list[str] | None = None, pci_buses: list[int] | None = None,
                 mig: dict[int, list[str]] | None = None) -> None:
        self.gpus, self.power_w, self.reasons, self.fail_after = gpus, power_w, reasons, fail_after
        self.energy_supported = energy_supported
        self.names = names or ["NVIDIA H100 80GB HBM3"] * gpus
        self.pci_buses = pci_buses or [0x18 + 0x10 * i for i in range(gpus)]  # NVML index order = PCI order
        self.mig = mig or {}  # GPU index -> its MIG instances' UUIDs (None: an empty slot)
        self.t0 = time.time()
        self.reads: dict[int, int] = {}
        self.masks: list[int] = []
        self.initialised = 0

    def nvmlInit(self): self.initialised += 1
    def nvmlShutdown(self): self.initialised -= 1
    def nvmlDeviceGetCount(self): return self.gpus
    def nvmlDeviceGetHandleByIndex(self, i): return SimpleNamespace(index=i)
    def nvmlDeviceGetName(self, h): return self.names[h.index]
    def nvmlDeviceGetPciInfo(self, h): return SimpleNamespace(domain=0, bus=self.pci_buses[h.index], device=0)

    def nvmlDeviceGetUUID(self, h):
        if getattr(h, "mig_slot", None) is not None:
            return self.mig[h.index][h.mig_slot]
        return f"GPU-{h.index}{h.index}{h.index}{h.index}a1b2-7c3d-4e5f-8a9b-0c1d2e3f4a5{h.index}"

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        if h.index not in self.mig:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 7

    def nvmlDeviceGetMigMode(self, h):  # [current, pending]: a GPU given MIG instances is in MIG mode
        if h.index not in self.mig:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE]

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, slot):
        if slot >= len(self.mig[h.index]) or self.mig[h.index][slot] is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return SimpleNamespace(index=h.index, mig_slot=slot)

    def nvmlSystemGetDriverVersion(self): return "570.86.15"
    def nvmlDeviceGetCudaComputeCapability(self, h): return (9, 0)

    def nvmlDeviceGetUtilizationRates(self, h):
        n = self.reads[h.index] = self.reads.get(h.index, 0) + 1
        if self.fail_after is not None and n > self.fail_after:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return SimpleNamespace(gpu=87 + h.index, memory=41)

    def nvmlDeviceGetMemoryInfo(self, h): return SimpleNamespace(used=12_345_678_912 + h.index, total=80 << 30, free=0)
    def nvmlDeviceGetPowerUsage(self, h): return int(self.power_w * 1000)

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return 71

    def nvmlDeviceGetClockInfo(self, h, clock):
        return {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619}[clock]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        mask = self.reasons(self.reads[h.index])
        self.masks.append(mask)
        return mask

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.energy_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(5_000_000 + (time.time() - self.t0) * self.power_w * 1000)  # steady power -> linear counter

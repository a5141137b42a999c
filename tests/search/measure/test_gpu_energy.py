"""GPU energy over the timed windows only, the rule for enough readings, and the instant-power
cross-check: the real sampler and summary, NVML faked only at search.nvml._nvml (no GPU here).
None of this has run on a GPU; the `cuda` test in test_telemetry_nvml.py is the one that would."""
from __future__ import annotations

import time

import pynvml
import pytest
from fake_nvml import FAST_S, FakeNvml

from search.measure import gpu_energy
from search.measure import gpu_telemetry
from search.measure import nvml
from search.measure.gpu_telemetry import GpuSampler, summary
from search.measure.nvml import GpuReading


class PhasedNvml(FakeNvml):
    """FakeNvml whose power changes when the test says, with an energy counter that integrates it
    and the instant-power field of nvmlDeviceGetFieldValues as pynvml returns it (a ctypes struct)."""

    def __init__(self, instant: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.instant = instant
        self.changed_at, self.energy_at_change_mj = time.time(), 5_000_000.0

    def set_watts(self, watts: float) -> None:
        self.energy_at_change_mj = self._energy_mj()
        self.changed_at, self.power_w = time.time(), watts

    def _energy_mj(self) -> float:
        return self.energy_at_change_mj + (time.time() - self.changed_at) * self.power_w * 1000

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.energy_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(self._energy_mj())

    def nvmlDeviceGetFieldValues(self, h, field_ids):
        assert field_ids == [(pynvml.NVML_FI_DEV_POWER_INSTANT, pynvml.NVML_POWER_SCOPE_GPU)]
        value = pynvml.c_nvmlFieldValue_t()
        value.fieldId, value.scopeId = field_ids[0]
        value.nvmlReturn = pynvml.NVML_SUCCESS if self.instant else pynvml.NVML_ERROR_NOT_SUPPORTED
        value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
        value.value.uiVal = int(self.power_w * 1000)
        return (pynvml.c_nvmlFieldValue_t * 1)(value)


@pytest.fixture
def phased(monkeypatch: pytest.MonkeyPatch):
    def install(**kwargs) -> PhasedNvml:
        f = PhasedNvml(**kwargs)
        monkeypatch.setattr(nvml, "_nvml", f)
        monkeypatch.setattr(gpu_telemetry, "_notice_cache", [])
        return f
    return install


def train_with_a_pause(f: PhasedNvml, timed_s: float, pause_s: float = 0.4):
    """Two timed stretches at 250 W around an evaluation pause at 400 W; returns the sampler and intervals."""
    with GpuSampler(interval_s=FAST_S) as sampler:
        time.sleep(0.1)
        a0 = time.time()
        time.sleep(timed_s / 2)
        a1 = time.time()
        f.set_watts(400.0)
        time.sleep(pause_s)
        f.set_watts(250.0)
        b0 = time.time()
        time.sleep(timed_s / 2)
        b1 = time.time()
        time.sleep(0.1)
    return sampler, [[a0, a1], [b0, b1]]


def test_energy_and_means_cover_the_timed_windows_and_leave_the_evaluation_pause_out(phased):
    f = phased(gpus=2, power_w=250.0)
    sampler, windows = train_with_a_pause(f, timed_s=2.0)  # 2 s: the rule holds even when load delays readings
    timed_s = sum(t1 - t0 for t0, t1 in windows)
    report = sampler.report({"timed_samples": 600.0}, windows)
    m = report.metrics
    assert report.info == {"gpu_energy_source": "energy counter"}
    assert m["energy_j"] == pytest.approx(2 * 250.0 * timed_s, rel=0.05)  # the 400 W pause (+16%) is not in it
    assert m["energy_j_per_sample"] == pytest.approx(m["energy_j"] / 600)
    assert m["gpu_power_w_mean"] == pytest.approx(250.0, rel=0.05) and m["gpu_power_instant_w_mean"] < 270
    assert m["energy_j_from_instant_power"] == pytest.approx(m["energy_j"], rel=0.05)
    assert m["energy_instant_power_to_counter_ratio"] == pytest.approx(1.0, abs=0.05)
    assert m["energy_j_from_power"] == pytest.approx(m["energy_j"], rel=0.05)
    assert m["gpu_window_s"] == pytest.approx(timed_s) and m["gpu_timed_intervals"] == 2
    # the same trial described by one window from its first to its last timed step counts the pause
    whole = sampler.report({"timed_start_unix_s": windows[0][0], "timed_end_unix_s": windows[1][1]}).metrics
    assert whole["energy_j"] > m["energy_j"] + 2 * 400.0 * 0.3


def test_too_little_timed_time_gives_no_energy_power_or_utilisation_and_says_why(phased):
    f = phased(gpus=1)
    sampler, windows = train_with_a_pause(f, timed_s=0.4)
    report = sampler.report({"timed_samples": 100.0}, windows)
    note = report.info["gpu_telemetry_note"]
    assert note.startswith("GPU energy and utilisation need timed windows of >= 1 s in all")
    assert "got 0.4" in note and "fix: more timed steps (train.budget_samples" in note and "\n" not in note
    absent = ("energy_j", "energy_j_per_sample", "energy_j_from_power", "energy_j_from_instant_power",
              "gpu_power_w_mean", "gpu_power_instant_w_mean", "gpu_util_percent_mean", "gpu_mem_util_percent_mean")
    assert not set(absent) & set(report.metrics)
    assert report.metrics["gpu_temp_c_mean"] == 71 and report.metrics["gpu_sm_clock_mhz_min"] == 1980


def readings(times: list[float], watts: float = 100.0) -> list[GpuReading]:
    return [GpuReading(0, t, 90, 40, 1e9, watts, 60, 1500, 1200, None, 1000.0 * watts * t) for t in times]


def test_windows_between_readings_hold_too_few_of_them():
    every_02 = [round(0.2 * k, 3) for k in range(60)]  # 0 .. 11.8 s
    # 20 windows of 0.06 s, each between two readings: 1.2 s timed, not one reading inside
    windows = [(1.0 + 0.4 * k + 0.07, 1.0 + 0.4 * k + 0.13) for k in range(20)]
    metrics, info = summary(readings(every_02), windows)
    assert "need >= 5 readings of each GPU inside the timed windows; GPU 0 has 0" in info["gpu_telemetry_note"]
    assert "energy_j" not in metrics and "gpu_util_percent_mean" not in metrics


def test_many_pauses_make_the_interpolated_share_too_large():
    every_02 = [round(0.2 * k, 3) for k in range(60)]
    windows = [(1.0 + 0.5 * k, 1.25 + 0.5 * k) for k in range(10)]  # 2.5 s timed, 9 pauses of 0.25 s
    # a quarter of the 0.2 s reading gap at each edge that is not on a reading (1.0 is; 5.75 is not), and
    # across each pause the two edges' quarters (only the end edge's where the next start is on a reading)
    assert gpu_energy.interpolated_time_s(every_02, windows) == pytest.approx(0.05 + 5 * 0.1 + 4 * 0.05)
    metrics, info = summary(readings(every_02), windows)
    assert "interpolated between readings" in info["gpu_telemetry_note"] and "(9 pauses)" in info["gpu_telemetry_note"]
    assert "energy_j" not in metrics
    # one stretch of the same 2.5 s passes, and the counter gives exactly 100 W x 2.5 s
    metrics, info = summary(readings(every_02), [(1.0, 3.5)])
    assert info == {"gpu_energy_source": "energy counter"} and metrics["energy_j"] == pytest.approx(250.0)


def test_windows_outside_the_sampled_time_are_refused(phased):
    phased(gpus=1, fail_after=3)  # NVML fails after three readings: sampling stops
    with GpuSampler(interval_s=FAST_S) as sampler:
        time.sleep(0.3)
        t0 = time.time()
        time.sleep(1.1)
        t1 = time.time()
    report = sampler.report({}, [[t0, t1]])
    assert "before and after the timed windows; GPU 0 was read from" in report.info["gpu_telemetry_note"]
    assert "GpuIsLost" in report.info["gpu_telemetry_error"] and "energy_j" not in report.metrics


@pytest.mark.parametrize("energy_supported,instant,source", [
    (False, True, "instant power x time"), (False, False, "averaged power x time")])
def test_without_the_counter_energy_is_power_integrated_over_the_windows(phased, energy_supported, instant, source):
    f = phased(gpus=1, power_w=250.0, energy_supported=energy_supported, instant=instant)
    sampler, windows = train_with_a_pause(f, timed_s=2.0)
    report = sampler.report({}, windows)
    assert report.info == {"gpu_energy_source": source}
    assert report.metrics["energy_j"] == pytest.approx(250.0 * sum(t1 - t0 for t0, t1 in windows), rel=0.05)
    assert "energy_instant_power_to_counter_ratio" not in report.metrics
    assert ("energy_j_from_instant_power" in report.metrics) is instant


def test_power_is_integrated_piecewise_linearly_and_the_counter_interpolated():
    ramp = [GpuReading(0, float(t), None, None, None, 100.0 * t, None, None, None, None, 50.0 * t * t * 1000)
            for t in range(5)]  # power 100 t W; the counter its integral, 50 t^2 J
    by_gpu = {0: ramp}
    assert gpu_energy.averaged_power_energy_j(by_gpu, [(1.0, 2.0), (3.0, 3.5)]) == pytest.approx(150 + 162.5)
    assert gpu_energy.energy_j(by_gpu, [(1.0, 3.0)]) == (pytest.approx(400.0), "energy counter")
    assert gpu_energy.instant_power_energy_j(by_gpu, [(1.0, 3.0)]) is None  # no instant field read

"""GPU telemetry: the real sampling thread and summary, NVML faked only at
search.nvml._nvml (this machine has no GPU); the real NVML path runs in the
`cuda` test on a GPU. Also MFU arithmetic with known numbers."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pynvml
import pytest

from search.measure import gpu_energy
from search.measure import gpu_telemetry
from search.measure import mfu
from search.measure import nvml
from search.measure.gpu_telemetry import GpuSampler, summarize
from search.measure.nvml import GpuReading

from fake_nvml import FAST_S, FakeNvml

THERMAL = pynvml.nvmlClocksEventReasonHwThermalSlowdown
SW_THERMAL = pynvml.nvmlClocksEventReasonSwThermalSlowdown
POWER_CAP = pynvml.nvmlClocksEventReasonSwPowerCap
HW_SLOWDOWN = pynvml.nvmlClocksEventReasonHwSlowdown
@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    def install(**kwargs) -> FakeNvml:
        f = FakeNvml(**kwargs)
        monkeypatch.setattr(nvml, "_nvml", f)
        monkeypatch.setattr(gpu_telemetry, "_notice_cache", [])
        return f
    return install


def sample_for(seconds: float, **kwargs) -> GpuSampler:
    with GpuSampler(interval_s=FAST_S, **kwargs) as sampler:
        time.sleep(seconds)
    return sampler


def test_every_field_is_parsed_in_its_unit(fake):
    f = fake(gpus=2)
    sampler = sample_for(0.3)
    assert sampler.unavailable is None and sampler.error is None and f.initialised == 0
    assert {s.index for s in sampler.samples} == {0, 1}
    s = next(s for s in sampler.samples if s.index == 1)
    assert (s.util_gpu_percent, s.util_mem_percent, s.mem_used_bytes) == (88.0, 41.0, 12_345_678_913.0)
    assert (s.power_w, s.temp_c, s.sm_clock_mhz, s.mem_clock_mhz) == (250.0, 71.0, 1980.0, 2619.0)
    assert s.energy_mj > 5_000_000 and abs(s.time_unix_s - time.time()) < 5
    m = summarize(sampler.samples)
    assert m["gpu_util_percent_mean"] == pytest.approx(87.5, abs=0.5) and m["gpu_util_percent_max"] == 88
    assert m["gpu_mem_used_bytes_max"] == 12_345_678_913
    assert (m["gpu_power_w_mean"], m["gpu_power_w_max"]) == (250.0, 250.0)
    assert (m["gpu_temp_c_mean"], m["gpu_temp_c_max"]) == (71.0, 71.0)
    assert (m["gpu_sm_clock_mhz_mean"], m["gpu_sm_clock_mhz_min"], m["gpu_mem_clock_mhz_mean"]) == (1980, 1980, 2619)
    assert m["gpu_count_sampled"] == 2
    assert sampler.device_name == "NVIDIA H100 80GB HBM3"


def test_trial_gpu_indices_follow_cuda_visible_devices(fake, monkeypatch):
    fake(gpus=4)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpu_telemetry.trial_gpu_indices(2) == [0, 1]
    assert gpu_telemetry.trial_gpu_indices(2, cuda_visible_devices="3,1") == [3, 1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert gpu_telemetry.trial_gpu_indices(4) == [2]


MIG_A = "MIG-5e1f0000-1c2d-5e6f-9a8b-7c6d5e4f3a2b"  # two MIG instances on GPU 1 sharing the prefix MIG-5e1f
MIG_B = "MIG-5e1f1111-1c2d-5e6f-9a8b-7c6d5e4f3a2b"


def test_uuids_prefixes_and_mig_instances_name_the_gpus_nvml_reads(fake, monkeypatch):
    f = fake(gpus=4, mig={1: [None, MIG_A, MIG_B]})
    uuid = [f.nvmlDeviceGetUUID(SimpleNamespace(index=i)) for i in range(4)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{uuid[3]},{uuid[0]}")
    assert gpu_telemetry.trial_gpu_indices(2) == [3, 0]
    assert nvml.visible_indices(4, "GPU-2222,GPU-0000a1b2") == [2, 0]  # unique prefixes, as CUDA accepts
    assert nvml.visible_indices(4, f"0,GPU-9999,{uuid[1]}") == [0]  # CUDA stops at the first entry naming nothing
    assert nvml.visible_indices(4, f"GPU-,{uuid[1]}") == []  # a prefix every UUID shares names no single GPU
    assert nvml.visible_gpus(4, f"{MIG_B},{uuid[2]}") == [nvml.VisibleGpu(1, mig=True), nvml.VisibleGpu(2)]
    assert nvml.visible_gpus(4, "MIG-5e1f1111") == [nvml.VisibleGpu(1, mig=True)]
    assert nvml.visible_gpus(4, "MIG-5e1f") == []  # ambiguous between the two instances
    assert nvml.visible_gpus(4, f"MIG-{uuid[1]}/1/0") == [nvml.VisibleGpu(1, mig=True)]  # the R450/R460 form
    # a MIG trial is not sampled: power, clocks and energy are the whole GPU's, shared with other instances
    assert gpu_telemetry.trial_gpu_indices(1, cuda_visible_devices=MIG_A) == []


def test_a_gpu_machine_named_by_uuid_keeps_its_gpu_values_and_slots(fake, monkeypatch):
    from search.commands import doctor
    from search.measure import fingerprint
    from search.trial import slots

    f = fake(gpus=2)
    uuid = [f.nvmlDeviceGetUUID(SimpleNamespace(index=i)) for i in range(2)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(uuid))
    # doctor sees both GPUs (this machine's torch is a CPU build, which doctor then names as the reason;
    # was "CUDA_VISIBLE_DEVICES hides every GPU", so fp16/tf32/fp8/2:4 left the space and one slot ran)
    assert doctor.gpus().why_none == "2 GPU(s) present but torch is a CPU-only build"
    assert [s.gpu for s in slots.make_slots("auto", 1, 2)] == uuid
    assert fingerprint._gpu_facts()["gpu_count"] == "2"


def test_ordinals_count_gpus_in_pci_bus_order_as_cuda_does_under_pci_bus_id(fake, monkeypatch):
    # two models whose NVML enumeration is not their PCI order: ordinal k is the k-th GPU by PCI bus
    fake(gpus=2, names=["NVIDIA L4", "NVIDIA A100-SXM4-80GB"], pci_buses=[0x65, 0x17])
    assert nvml.visible_indices(2, "0") == [1] and nvml.visible_indices(2, "1,0") == [0, 1]
    with GpuSampler(indices=gpu_telemetry.trial_gpu_indices(1, cuda_visible_devices="0"), interval_s=FAST_S) as s:
        pass
    assert s.device_name == "NVIDIA A100-SXM4-80GB"
    # CUDA_VISIBLE_DEVICES unset: the same PCI order (was NVML's index order, so `search run` sampled the L4)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nvml.visible_indices(2) == [1, 0] and gpu_telemetry.trial_gpu_indices(1) == [1]


def test_a_gpu_in_mig_mode_named_by_ordinal_or_uuid_is_a_mig_instance(fake, monkeypatch):
    # CUDA runs on one of its instances, so its power, energy and peak are not the trial's: not sampled
    f = fake(gpus=2, mig={1: [MIG_A]})
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nvml.visible_gpus(2) == [nvml.VisibleGpu(0), nvml.VisibleGpu(1, mig=True)]
    uuid1 = f.nvmlDeviceGetUUID(SimpleNamespace(index=1))
    assert nvml.visible_gpus(2, f"1,{uuid1},0") == [nvml.VisibleGpu(1, mig=True)] * 2 + [nvml.VisibleGpu(0)]
    assert gpu_telemetry.trial_gpu_indices(1, cuda_visible_devices="1") == []


def test_the_cuda_device_order_is_pinned_to_pci_bus_or_refused(monkeypatch):
    from search.errors import BadInput

    env = {}
    nvml.pin_cuda_device_order(env)
    assert env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    nvml.pin_cuda_device_order(env)
    with pytest.raises(BadInput, match="CUDA_DEVICE_ORDER must be PCI_BUS_ID .*got 'FASTEST_FIRST'; fix: unset"):
        nvml.pin_cuda_device_order({"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})


def test_a_sweep_under_another_cuda_device_order_exits_2_before_creating_anything(workdir):
    from conftest import made_in, run_search

    result = run_search("multirun", "hydra.sweeper.n_trials=1", cwd=workdir, timeout_s=300,
                        env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith("search: error: CUDA_DEVICE_ORDER must be PCI_BUS_ID")
    assert len(result.stderr.strip().splitlines()) == 1
    assert made_in(workdir) == []


def test_only_the_trials_gpus_are_read_and_series_are_stepped(fake):
    fake(gpus=4)
    sampler = sample_for(0.2, indices=[2])
    assert {s.index for s in sampler.samples} == {2}
    series = gpu_telemetry.series(sampler.samples)
    assert set(series) == {f"timeline/gpu2_{name}" for name in gpu_telemetry.SERIES_FIELDS}
    power = series["timeline/gpu2_power_w"]
    assert [step for step, _, _ in power] == list(range(len(sampler.samples)))
    assert all(value == 250.0 and ts == int(s.time_unix_s * 1000) for (_, value, ts), s in zip(power, sampler.samples))


def test_throttle_bitmasks_become_flag_fractions(fake):
    # reading n: thermal (HW or SW) on every 4th, power cap on every odd one, HW slowdown never
    f = fake(gpus=1, reasons=lambda n: (THERMAL if n % 8 == 0 else SW_THERMAL if n % 4 == 0 else 0)
             | (POWER_CAP if n % 2 else 0))
    sampler = sample_for(0.5)
    masks = f.masks[: len(sampler.samples)]
    assert len(masks) >= 8
    m = summarize(sampler.samples)
    assert m["gpu_throttle_thermal_fraction"] == sum(bool(x & (THERMAL | SW_THERMAL)) for x in masks) / len(masks)
    assert m["gpu_throttle_power_cap_fraction"] == sum(bool(x & POWER_CAP) for x in masks) / len(masks)
    assert 0.1 < m["gpu_throttle_thermal_fraction"] < 0.4 and 0.3 < m["gpu_throttle_power_cap_fraction"] < 0.7
    assert m["gpu_throttle_hw_slowdown_fraction"] == 0.0
    assert nvml.decode_throttle(HW_SLOWDOWN | POWER_CAP)["hw_slowdown"] is True


def test_older_throttle_function_name_is_used_when_the_new_one_is_missing(fake, monkeypatch):
    f = fake(gpus=1, reasons=lambda n: POWER_CAP)
    older = SimpleNamespace(**{name: getattr(f, name) for name in dir(f) if name.startswith("nvml")})
    older.nvmlDeviceGetCurrentClocksThrottleReasons = older.nvmlDeviceGetCurrentClocksEventReasons
    del older.nvmlDeviceGetCurrentClocksEventReasons
    monkeypatch.setattr(nvml, "_nvml", older)
    assert summarize(sample_for(0.1).samples)["gpu_throttle_power_cap_fraction"] == 1.0


def test_energy_is_the_counter_delta_over_the_timed_window(fake):
    fake(gpus=2, power_w=250.0)
    with GpuSampler(interval_s=FAST_S) as sampler:
        time.sleep(0.15)
        t0 = time.time()
        time.sleep(1.2)  # NVML's power is a 1 s average: shorter timed windows get no energy (test_gpu_energy.py)
        t1 = time.time()
        time.sleep(0.15)
    report = sampler.report({"timed_start_unix_s": t0, "timed_end_unix_s": t1, "timed_samples": 1000.0})
    m = report.metrics
    expected_j = 2 * 250.0 * (t1 - t0)  # two GPUs at 250 W
    assert m["energy_j"] == pytest.approx(expected_j, rel=0.02)
    assert m["energy_j_per_sample"] == pytest.approx(m["energy_j"] / 1000)
    assert m["energy_j_from_power"] == pytest.approx(m["energy_j"], rel=0.05)  # the cross-check on a steady GPU
    assert m["gpu_window_s"] == pytest.approx(t1 - t0)
    assert report.info == {"gpu_energy_source": "energy counter"}


def test_energy_interpolates_the_counter_at_window_edges():
    readings = [GpuReading(0, float(t), 50, 10, 1e9, 1000.0 * w, 60, 1500, 1200, None, e)
                for t, w, e in [(0, 1, 0), (1, 2, 1000), (2, 3, 3000), (3, 3, 6000)]]
    by_gpu = {0: readings}  # too few readings for the trial rule (test_gpu_energy.py): the arithmetic alone
    assert gpu_energy.energy_j(by_gpu, [(1, 3)]) == (pytest.approx(5.0), "energy counter")
    assert gpu_energy.energy_j(by_gpu, [(0.5, 2.5)])[0] == pytest.approx((4500 - 500) / 1000)
    assert gpu_energy.energy_j(by_gpu, [(0.5, 1), (2, 2.5)])[0] == pytest.approx((1000 - 500 + 4500 - 3000) / 1000)
    assert summarize(readings)["energy_j"] == pytest.approx(6.0)  # no window: all samples


def test_window_samples_fall_back_to_the_trials_step_counts():
    metrics = {"timed_start_unix_s": 10.0, "timed_end_unix_s": 12.0, "samples_trained": 8000.0, "steps": 125.0,
               "throughput_windows": 12.0, "throughput_window_steps": 10.0}
    assert gpu_telemetry.trial_intervals(metrics) == ([(10.0, 12.0)], 12 * 10 * 64)
    assert gpu_telemetry.trial_intervals(metrics, [[11.0, 11.5], [10.0, 10.5]]) == (
        [(10.0, 10.5), (11.0, 11.5)], 12 * 10 * 64)  # the trial's own intervals win, sorted
    assert gpu_telemetry.trial_intervals({"samples_trained": 8000.0}) == (None, 8000.0)


def test_an_unsupported_field_is_absent_and_sampling_goes_on(fake):
    fake(gpus=1, energy_supported=False)
    sampler = sample_for(0.2)
    m, info = gpu_telemetry.summary(sampler.samples, samples_trained=100)
    assert sampler.error is None and len(sampler.samples) >= 3
    assert info == {"gpu_energy_source": "averaged power x time"}  # no counter, no instant-power field
    assert m["energy_j"] == m["energy_j_from_power"] > 0 and m["energy_j_per_sample"] == m["energy_j"] / 100


def test_an_nvml_error_mid_trial_stops_sampling_and_keeps_earlier_samples(fake):
    fake(gpus=1, fail_after=5)
    with GpuSampler(interval_s=FAST_S) as sampler:
        time.sleep(0.4)
        assert not sampler._thread.is_alive()  # stopped by itself, the trial goes on
    assert len(sampler.samples) == 5
    assert "GpuIsLost" in sampler.error
    report = sampler.report({})
    assert report.info["gpu_telemetry_error"] == sampler.error
    assert report.metrics["gpu_power_w_mean"] == 250.0 and report.metrics["gpu_samples"] == 5


def test_a_trial_that_shared_its_gpu_with_another_gets_no_power_energy_or_utilisation(fake):
    """hydra.sweeper.trials_per_gpu=2: NVML reads the GPU, so each trial's energy would count its neighbour's."""
    fake(gpus=2)
    with GpuSampler(indices=[0], interval_s=FAST_S) as first:
        with GpuSampler(indices=[0], interval_s=FAST_S) as beside:
            time.sleep(0.2)
        with GpuSampler(indices=[1], interval_s=FAST_S) as other_gpu:
            time.sleep(0.2)
        time.sleep(0.2)
    after = sample_for(0.2, indices=[0])  # the same GPU once the others ended
    shared = first.report({})
    assert not {"energy_j", "energy_j_per_sample", "gpu_power_w_mean", "gpu_util_percent_mean"} & set(shared.metrics)
    note = shared.info["gpu_telemetry_note"]
    assert note.startswith("another trial ran on GPU 0 during this trial's timed windows")
    assert note.endswith("fix: hydra.sweeper.trials_per_gpu=1") and "\n" not in note
    assert shared.metrics["gpu_sm_clock_mhz_mean"] == 1980  # the clocks it ran under stay
    assert "gpu_telemetry_note" in beside.report({}).info
    for alone in (other_gpu, after):
        report = alone.report({})
        assert report.metrics["energy_j"] > 0 and "gpu_telemetry_note" not in report.info
    # windows of the first trial after its neighbour had left: its own figures
    t0 = first.samples[-1].time_unix_s - 0.1
    windows = first.report({"samples_trained": 10.0}, [[t0, first.samples[-1].time_unix_s]])
    assert "another trial" not in windows.info.get("gpu_telemetry_note", "")


def test_without_a_gpu_the_real_nvml_sampler_is_a_no_op_with_one_notice(monkeypatch):
    if nvml.start() is None:
        nvml.stop()
        pytest.skip("this machine has an NVIDIA GPU; the cuda test covers it")
    monkeypatch.setattr(gpu_telemetry, "_notice_cache", [])
    with GpuSampler() as sampler:
        time.sleep(0.05)
    assert sampler.samples == [] and sampler.error is None
    line = gpu_telemetry.notice()
    assert line.startswith("no NVIDIA GPU (NVML: ") and line.endswith("logging CPU figures only") and "\n" not in line
    assert sampler.notice() == line and gpu_telemetry.notice() is line
    assert sampler.report({"samples_trained": 10.0}).metrics == {}
    assert gpu_telemetry.trial_gpu_indices(1) == []


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.cuda
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU")
def test_real_gpu_power_and_energy_around_a_matmul_loop():
    import torch

    gpu_telemetry._notice_cache.clear()
    assert gpu_telemetry.notice() is None
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    with GpuSampler(indices=gpu_telemetry.trial_gpu_indices(1)) as sampler:
        torch.cuda.synchronize()
        t0, steps = time.time(), 0
        while time.time() - t0 < 3.0:
            x = torch.tanh(x @ x)
            steps += 1
            if steps % 10 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        t1 = time.time()
    report = sampler.report({"timed_start_unix_s": t0, "timed_end_unix_s": t1, "timed_samples": float(steps)})
    m = report.metrics
    assert sampler.error is None, sampler.error
    assert m["gpu_power_w_mean"] > 0 and m["energy_j"] > 0 and m["energy_j_per_sample"] > 0
    assert m["gpu_util_percent_max"] > 0 and m["gpu_sm_clock_mhz_mean"] > 0
    assert m["energy_j_from_power"] == pytest.approx(m["energy_j"], rel=0.5)


# -- MFU ---------------------------------------------------------------------------------------


def test_mfu_of_known_numbers():
    # 1.3e9 parameters, 24 layers, width 2048, context 2048: 6N + 12LdT FLOPs per token (objectives/gpt.py counts them)
    per_token = 6 * 1.3e9 + 12 * 24 * 2048 * 2048
    tokens_per_s = 8 * 50_000.0
    got = mfu.mfu(per_token, tokens_per_s, "NVIDIA H100 80GB HBM3", "bf16", n_gpus=8)
    assert got == pytest.approx(per_token * tokens_per_s / (989e12 * 8))
    assert 0.4 < got < 0.5
    assert mfu.mfu(1e9, 1000.0, "NVIDIA A100-SXM4-80GB", "tf32") == pytest.approx(1e12 / 156e12)
    assert mfu.mfu(1e9, 1000.0, "NVIDIA A100-SXM4-80GB", "fp32") == pytest.approx(1e12 / 19.5e12)
    assert mfu.training_flops_from_forward(2e6) == 6e6


@pytest.mark.parametrize("name,precision,peak", [
    ("NVIDIA H100 80GB HBM3", "bf16", 989e12), ("NVIDIA H100 SXM5 80GB", "fp16", 989e12),
    ("NVIDIA H100 PCIe", "bf16", 756e12), ("NVIDIA H100 80GB HBM3", "tf32", 494.5e12),
    ("NVIDIA H200", "bf16", 989e12), ("NVIDIA A100 80GB PCIe", "bf16", 312e12), ("NVIDIA L4", "bf16", 121e12),
    ("NVIDIA H100 80GB HBM3", "fp32", 67e12),
])
def test_peak_table(name, precision, peak):
    assert mfu.peak_flops_per_s(name, precision) == peak


@pytest.mark.parametrize("name,precision", [("NVIDIA H100 80GB HBM3", "fp8"), ("NVIDIA L40S", "bf16"),
                                            ("cpu", "fp32"), ("", "bf16"), ("Tesla V100-SXM2-16GB", "fp16")])
def test_mfu_is_none_without_an_honest_peak(name, precision):
    assert mfu.mfu(1e9, 1000.0, name, precision) is None

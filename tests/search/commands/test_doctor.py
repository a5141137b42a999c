"""Fingerprint and `doctor` on this machine, with the real torch, Optuna and MLflow."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from search.commands import doctor
from search.measure import fingerprint
from search.measure import nvml

from conftest import pythonpath



def run_doctor(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": pythonpath(), "COLUMNS": "200", **env}
    return subprocess.run([sys.executable, "-m", "search.commands.doctor", *args], cwd=cwd, env=full_env, text=True,
                          capture_output=True, timeout=120)


def has_gpu() -> bool:
    if nvml.start() is None:
        nvml.stop()
        return True
    return False


def test_fingerprint_has_every_key_with_a_non_empty_string():
    fp = fingerprint.collect()
    assert list(fp) == list(fingerprint.KEYS)
    assert all(isinstance(v, str) and v for v in fp.values()), fp
    assert fp["cpu_count"] == str(os.cpu_count())  # the machine's: nightly's same hardware under taskset too
    assert fp["cpu_cores_usable"] == str(len(os.sched_getaffinity(0)))  # what taskset leaves: a change it reports
    assert fp["python_version"] == ".".join(map(str, sys.version_info[:3]))
    import torch

    assert fp["torch_version"] == torch.__version__
    assert fp["cuda_version"] == (torch.version.cuda or "none")
    if not has_gpu():
        assert (fp["gpu_name"], fp["gpu_count"], fp["driver_version"]) == ("none", "0", "none")


def test_fingerprint_reads_gpu_facts_through_nvml(monkeypatch):
    class FakeNvml:  # the one seam tests may fake; names and types as pynvml's
        def nvmlInit(self): pass
        def nvmlShutdown(self): pass
        def nvmlDeviceGetCount(self): return 2
        def nvmlDeviceGetHandleByIndex(self, i): return SimpleNamespace(index=i)
        def nvmlDeviceGetName(self, h): return "NVIDIA H100 80GB HBM3"
        def nvmlDeviceGetUUID(self, h): return f"GPU-{h.index:08d}-0000-0000-0000-000000000000"
        def nvmlDeviceGetPciInfo(self, h): return SimpleNamespace(domain=0, bus=h.index, device=0)
        def nvmlSystemGetDriverVersion(self): return "570.86.15"

    monkeypatch.setattr(nvml, "_nvml", FakeNvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fp = fingerprint.collect()
    assert (fp["gpu_name"], fp["gpu_count"], fp["driver_version"]) == ("NVIDIA H100 80GB HBM3", "2", "570.86.15")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert fingerprint.collect()["gpu_count"] == "1"


def test_diff_names_exactly_what_changed():
    old = fingerprint.collect()
    new = {**old, "torch_version": "2.99.0", "host": "other-host", "driver_version": "999.1"}
    assert fingerprint.diff(old, old) == []
    assert fingerprint.diff(old, new) == [f"driver_version: {old['driver_version']} -> 999.1",
                                          f"torch_version: {old['torch_version']} -> 2.99.0",
                                          f"host: {old['host']} -> other-host"]
    assert fingerprint.diff(old, new, ignore_host=True) == [f"driver_version: {old['driver_version']} -> 999.1",
                                                            f"torch_version: {old['torch_version']} -> 2.99.0"]
    gone = {k: v for k, v in old.items() if k != "cudnn_version"}
    assert fingerprint.diff(old, gone) == [f"cudnn_version: {old['cudnn_version']} -> (absent)"]


def test_a_fingerprint_half_written_by_another_worker_is_no_change():
    now = fingerprint.collect()
    half = {k: now[k] for k in fingerprint.KEYS[:4]}  # the first worker is still writing it, key by key
    assert fingerprint.changes_since(half, now) == [] and fingerprint.changes_since({}, now) == []
    assert fingerprint.changes_since({**half, "torch_version": "2.99.0"}, now) == [
        f"torch_version: 2.99.0 -> {now['torch_version']}"]


def test_tags_round_trip():
    fp = fingerprint.collect()
    tags = fingerprint.as_tags(fp)
    assert set(tags) == {f"fingerprint.{k}" for k in fp}
    assert fingerprint.from_tags({**tags, "search.role": "sweep"}) == fp


def test_runnable_values_on_a_cpu_are_fp32_and_bf16():
    if has_gpu():
        pytest.skip("this machine has a GPU")
    values = doctor.runnable_knob_values()
    assert values["precision"] == ["fp32", "bf16"]
    assert values["parallel.devices"] == list(range(1, len(os.sched_getaffinity(0)) + 1))
    assert values["model_pruning.method"] == ["structured", "unstructured"]
    removed = doctor.removed_values()
    assert sorted(removed) == ["framework.cudnn_benchmark=true", "memory.expandable_segments=true",
                               "model_pruning.method='2:4'", "precision=fp16", "precision=fp8", "precision=tf32"]
    assert removed["precision=tf32"].startswith("precision=tf32 needs a CUDA GPU; got no usable GPU (")
    assert "gloo" in doctor.ddp_backends()


def test_doctor_and_the_trial_run_the_same_check_on_the_same_facts():
    """NVML's facts (the sweep, doctor) and torch's (the trial) agree here, and each knob's one check
    decides: bf16 on a GPU needs compute capability 8.0 both ways, ranks x threads fit the cores."""
    from objectives.hardware import Hardware, from_torch
    from search.measure.machine import machine_hardware

    sweep, trial = machine_hardware(), from_torch()
    assert (sweep.cpu_cores, sweep.gpu_count, sweep.compute_capability, sweep.torchao) == \
        (trial.cpu_cores, trial.gpu_count, trial.compute_capability, trial.torchao)
    turing = Hardware(cpu_cores=4, gpu_count=2, compute_capability=(7, 5))
    assert doctor.runnable_knob_values(turing)["precision"] == ["fp32", "fp16"]
    assert doctor.runnable_knob_values(turing)["parallel.devices"] == [1, 2]
    assert doctor.removed_values(turing)["precision=bf16"].startswith(
        "precision=bf16 needs compute capability 8.0 or later on a GPU (bf16 tensor cores); got compute capability 7.5")
    assert doctor.runnable_knob_values(Hardware(cpu_cores=3))["parallel.devices"] == [1, 2, 3]


def test_doctor_exits_0_when_storage_and_tracking_are_reachable(tmp_path):
    result = run_doctor("--storage", str(tmp_path / "study.journal"), cwd=tmp_path,
                        env={"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"})
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    for expected in ("torch_version", "cpu_model", "precision", "parallel.devices", "study storage", "MLflow tracking",
                     "everything a sweep needs is present"):
        assert expected in out
    assert not (tmp_path / "study.journal").exists()  # checking creates no study
    assert not (tmp_path / "mlflow.db").exists() and "made by the first sweep" in " ".join(out.split())  # nor a store


def test_doctor_exits_1_on_unreachable_storage_and_never_prints_the_password(tmp_path):
    url = "postgresql://u:secret@127.0.0.1:1/db"
    result = run_doctor("--storage", url, cwd=tmp_path, env={"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/m.db"})
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "secret" not in out
    assert "postgresql://u:***@127.0.0.1:1/db" in out and "missing" in out


def test_unreachable_tracking_server_is_missing_quickly(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://u:secret@127.0.0.1:1")
    check = doctor.check_tracking()
    assert not check.ok and check.needed
    assert "secret" not in check.detail and "u:***@127.0.0.1:1" in check.detail
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT" not in os.environ  # the short timeout was only for the check


def test_unwritable_journal_directory_is_missing(tmp_path):
    check = doctor.check_storage(str(tmp_path / "no-such-dir" / "study.journal"))
    assert not check.ok and "not writable" in check.detail

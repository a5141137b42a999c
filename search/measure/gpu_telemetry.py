"""GPU figures of a trial, sampled by the sweep process with NVML around it.

Sampling from outside the trial sees every rank's GPU and costs the trial
nothing; a thread reads each GPU every `interval_s` (0.2 s) and keeps the
readings with their time.time() stamps. The trial reports the wall-clock
intervals of its timed windows (`timed_windows_unix_s`, evaluation pauses
left out), so the summary describes exactly the steps whose throughput is
scored, and energy per sample divides the energy of those steps by the
samples they trained. How energy is integrated over those intervals, and
when the readings are too few to say (then energy, power and utilisation
are absent and `gpu_telemetry_note` says why): search/measure/gpu_energy.py.

Telemetry never fails a trial: without NVML the sampler does nothing and
`notice()` gives one line for the sweep to print once; an NVML error while
sampling (GPU lost, driver gone) ends sampling, keeps what was read, and is
reported as `gpu_telemetry_error`.
"""
from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from search.measure import gpu_energy, gpu_sharing
from search.measure import nvml
from search.measure.nvml import GpuReading

SAMPLE_INTERVAL_S = 0.2
TIMELINE = "timeline/"  # MLflow groups metrics by their prefix before a slash
SERIES_FIELDS = ("util_gpu_percent", "util_mem_percent", "mem_used_bytes", "power_w", "temp_c", "sm_clock_mhz",
                 "mem_clock_mhz")
_notice_cache: list[str | None] = []


def notice() -> str | None:
    """One line saying GPU figures are absent and why, or None when NVML sees GPUs.
    Cached: the sweep prints it once, not once per trial."""
    if not _notice_cache:
        reason = nvml.start()
        if reason is None:
            nvml.stop()
            _notice_cache.append(None)
        else:
            _notice_cache.append(_notice_line(reason))
    return _notice_cache[0]


def _notice_line(reason: str) -> str:
    return f"no NVIDIA GPU (NVML: {reason}): logging CPU figures only"


def trial_gpu_indices(devices: int, cuda_visible_devices: str | None = None) -> list[int]:
    """NVML indices of the GPUs a trial with `parallel.devices` ranks uses: its cuda:0..devices-1,
    given the CUDA_VISIBLE_DEVICES the trial runs with (default: the sweep's own).

    None for a trial on a MIG instance: NVML reads power, energy, clocks and
    utilisation per physical GPU, shared with the other instances on it, so
    they would not be this trial's figures (nor would MFU against the whole
    GPU's peak)."""
    reason = nvml.start()
    if reason is not None:
        return []
    try:
        gpus = nvml.visible_gpus(nvml.device_count(), cuda_visible_devices)[:devices]
    except Exception:  # a GPU that does not answer: the trial runs, unsampled
        return []
    finally:
        nvml.stop()
    return [] if any(gpu.mig for gpu in gpus) else [gpu.index for gpu in gpus]


@dataclass
class GpuReport:
    """What one trial adds to its result: numbers, strings, and stepped series."""

    metrics: dict[str, float]
    info: dict[str, str]
    series: dict[str, list[tuple[int, float, int]]]


@dataclass
class GpuSampler:
    """Context manager: reads `indices` (None: every GPU) every `interval_s` while open."""

    indices: list[int] | None = None
    interval_s: float = SAMPLE_INTERVAL_S
    samples: list[GpuReading] = field(default_factory=list)
    error: str | None = None
    unavailable: str | None = None
    device_name: str = ""  # of the first sampled GPU, for the MFU peak table; "" without one
    _stay: int | None = None  # its key in search/measure/gpu_sharing.py
    _overlaps: list[gpu_sharing.Overlap] = field(default_factory=list)  # other trials on its GPUs meanwhile
    _handles: list[tuple[int, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> "GpuSampler":
        self.unavailable = nvml.start()
        if self.unavailable is not None:
            return self
        try:
            wanted = range(nvml.device_count()) if self.indices is None else self.indices
            self._handles = [(i, nvml.handle(i)) for i in wanted]
            self.device_name = nvml.device_name(self._handles[0][1]) if self._handles else ""
        except Exception as err:
            self.error = _describe(err)
            nvml.stop()
            return self
        if not self._handles:  # a CPU trial on a GPU machine
            nvml.stop()
            return self
        self._stay = gpu_sharing.arrive(i for i, _ in self._handles)
        self._thread = threading.Thread(target=self._run, name="search-gpu-telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        if self._stay is not None:
            self._overlaps = gpu_sharing.leave(self._stay)
        nvml.stop()

    def _run(self) -> None:
        while self._sample() and not self._stop.wait(self.interval_s):
            pass
        if self.error is None:
            self._sample()  # a reading at the very end brackets the trial's last window edge

    def _sample(self) -> bool:
        now = time.time()
        try:
            readings = [nvml.read(i, h, now) for i, h in self._handles]
        except Exception as err:  # GpuIsLost, Unknown, a driver reload: stop, keep what we have
            self.error = _describe(err)
            return False
        self.samples.extend(readings)
        return True

    def notice(self) -> str | None:
        return None if self.unavailable is None else _notice_line(self.unavailable)

    def report(self, trial_metrics: Mapping[str, float],
               timed_windows: Sequence[Sequence[float]] | None = None) -> GpuReport:
        """Summary over the trial's timed windows: the intervals it reported (evaluation pauses left
        out), else the one window its metrics describe, else the whole trial."""
        intervals, samples_trained = trial_intervals(trial_metrics, timed_windows)
        shared = []
        if self._overlaps and self.samples:
            shared = gpu_sharing.neighbours(self._overlaps, intervals or [(self.samples[0].time_unix_s,
                                                                            self.samples[-1].time_unix_s)])
        metrics, info = summary(self.samples, intervals, samples_trained,
                                gpu_sharing.note(shared) if shared else None)
        if self.error is not None:
            info["gpu_telemetry_error"] = self.error
        return GpuReport(metrics, info, series(self.samples))


def trial_intervals(metrics: Mapping[str, float], timed_windows: Sequence[Sequence[float]] | None = None
                    ) -> tuple[list[tuple[float, float]] | None, float | None]:
    """(timed intervals in unix seconds or None, samples trained inside them).

    The intervals are the trial's `timed_windows_unix_s`, else the one window
    from `timed_start_unix_s` to `timed_end_unix_s` (a user's objective may
    report only those). Samples in them are `timed_samples` when the trial
    reports it; otherwise the timed windows' steps times the global batch
    (samples_trained / steps)."""
    start, end = metrics.get("timed_start_unix_s"), metrics.get("timed_end_unix_s")
    if timed_windows:
        intervals = sorted((float(t0), float(t1)) for t0, t1 in timed_windows)
    elif start is not None and end is not None and end > start:
        intervals = [(start, end)]
    else:
        return None, metrics.get("samples_trained")
    if "timed_samples" in metrics:
        return intervals, metrics["timed_samples"]
    steps, trained = metrics.get("steps"), metrics.get("samples_trained")
    windows, window_steps = metrics.get("throughput_windows"), metrics.get("throughput_window_steps")
    if not steps or trained is None or windows is None or window_steps is None:
        return intervals, None
    return intervals, windows * window_steps * trained / steps


def summarize(samples: Iterable[GpuReading], intervals: Sequence[tuple[float, float]] | None = None,
              samples_trained: float | None = None) -> dict[str, float]:
    """The metrics of `summary`."""
    return summary(samples, intervals, samples_trained)[0]


def summary(samples: Iterable[GpuReading], intervals: Sequence[tuple[float, float]] | None = None,
            samples_trained: float | None = None, shared_note: str | None = None
            ) -> tuple[dict[str, float], dict[str, str]]:
    """Metrics over the timed `intervals` (unix seconds), or over all readings when None; and info.

    Means and maxima pool every sampled GPU (per-GPU figures); energy sums the
    GPUs. Energy, power and utilisation need readings that can hold them
    (gpu_energy's rule) and GPUs this trial had to itself (`shared_note`,
    search/measure/gpu_sharing.py); without, they are absent and info's
    `gpu_telemetry_note` says why."""
    by_gpu: dict[int, list[GpuReading]] = {}
    for s in sorted(samples, key=lambda s: s.time_unix_s):
        by_gpu.setdefault(s.index, []).append(s)
    if not by_gpu:
        return {}, {}
    every = [s for readings in by_gpu.values() for s in readings]
    note = shared_note
    if intervals is None:  # the whole trial: no pauses to keep apart, no claim about timed steps
        intervals = [(every[0].time_unix_s, max(s.time_unix_s for s in every))]
    elif note is None:
        note = gpu_energy.insufficiency(by_gpu, intervals)
    timed_s = sum(t1 - t0 for t0, t1 in intervals)
    inside = gpu_energy.inside(every, intervals) or _nearest(every, (intervals[0][0] + intervals[-1][1]) / 2)
    out: dict[str, float] = {"gpu_count_sampled": float(len(by_gpu)), "gpu_samples": float(len(inside)),
                             "gpu_window_s": timed_s, "gpu_timed_intervals": float(len(intervals))}
    _stats(out, "gpu_mem_used_bytes", [s.mem_used_bytes for s in inside], ("max",))
    _stats(out, "gpu_temp_c", [s.temp_c for s in inside], ("mean", "max"))
    _stats(out, "gpu_sm_clock_mhz", [s.sm_clock_mhz for s in inside], ("mean", "min"))
    _stats(out, "gpu_mem_clock_mhz", [s.mem_clock_mhz for s in inside], ("mean",))
    flagged = [s.throttle for s in inside if s.throttle is not None]
    if flagged:
        for flag in nvml.THROTTLE_FLAGS:
            out[f"gpu_throttle_{flag}_fraction"] = sum(f[flag] for f in flagged) / len(flagged)
    if note is not None:
        return out, {"gpu_telemetry_note": note}
    _stats(out, "gpu_util_percent", [s.util_gpu_percent for s in inside], ("mean", "max"))
    _stats(out, "gpu_mem_util_percent", [s.util_mem_percent for s in inside], ("mean", "max"))
    _stats(out, "gpu_power_w", [s.power_w for s in inside], ("mean", "max"))
    _stats(out, "gpu_power_instant_w", [s.power_instant_w for s in inside], ("mean", "max"))
    info: dict[str, str] = {}
    energy = gpu_energy.energy_j(by_gpu, intervals)
    if energy is not None:
        out["energy_j"], info["gpu_energy_source"] = energy
        if samples_trained:
            out["energy_j_per_sample"] = energy[0] / samples_trained
    from_power = gpu_energy.averaged_power_energy_j(by_gpu, intervals)
    if from_power is not None:
        out["energy_j_from_power"] = from_power
    from_instant = gpu_energy.instant_power_energy_j(by_gpu, intervals)
    if from_instant is not None:
        out["energy_j_from_instant_power"] = from_instant
        if energy is not None and info["gpu_energy_source"] == "energy counter" and energy[0] > 0:
            out["energy_instant_power_to_counter_ratio"] = from_instant / energy[0]
    return out, info


def series(samples: Iterable[GpuReading]) -> dict[str, list[tuple[int, float, int]]]:
    """Per GPU and field, (step, value, timestamp_ms) for stepped MLflow metrics such as `timeline/gpu0_power_w`.

    MLflow's runs table shows a series' last reading, taken after training (0% utilisation on an H200's
    fastest trial, whose `gpu_util_percent_mean` over its timed windows was 94%); the `timeline/` group says
    that this is a timeline, and keeps these columns apart from the trial's own figures."""
    out: dict[str, list[tuple[int, float, int]]] = {}
    steps: dict[int, int] = {}
    for s in sorted(samples, key=lambda s: s.time_unix_s):
        step = steps[s.index] = steps.get(s.index, -1) + 1
        for name in SERIES_FIELDS:
            value = getattr(s, name)
            if value is not None:
                out.setdefault(f"{TIMELINE}gpu{s.index}_{name}", []).append((step, float(value), int(s.time_unix_s * 1000)))
    return out


def _nearest(samples: list[GpuReading], t: float) -> list[GpuReading]:
    """A window shorter than the sampling interval holds no reading: use the closest one per GPU."""
    best: dict[int, GpuReading] = {}
    for s in samples:
        if s.index not in best or abs(s.time_unix_s - t) < abs(best[s.index].time_unix_s - t):
            best[s.index] = s
    return list(best.values())


def _stats(out: dict[str, float], name: str, values: list[float | None], kinds: tuple[str, ...]) -> None:
    present = [v for v in values if v is not None]
    if not present:
        return
    for kind in kinds:
        out[f"{name}_{kind}"] = {"mean": statistics.fmean, "max": max, "min": min}[kind](present)


def _describe(err: Exception) -> str:
    return " ".join(f"{type(err).__name__}: {err}".split())

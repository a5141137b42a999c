"""CPU figures of a trial, sampled from outside its process tree with psutil.

Sampling from the sweep process sees the trial process, its DDP ranks and
its DataLoader workers together, which the trial cannot measure about
itself once the workers have exited. Memory is summed as PSS (proportional
set size): forked workers share most pages with their parent, and summing
their RSS would count those pages once per process.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import psutil

SAMPLE_INTERVAL_S = 0.1


@dataclass
class TreeSampler:
    """Peak summed PSS and mean CPU utilisation of `pid` and all its descendants."""

    pid: int
    interval_s: float = SAMPLE_INTERVAL_S
    peak_pss_bytes: int = 0
    cpu_percent_samples: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _procs: dict[int, psutil.Process] = field(default_factory=dict)

    def __enter__(self) -> "TreeSampler":
        self._thread = threading.Thread(target=self._run, name="search-telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)

    def _sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        pss, cpu = 0, 0.0
        for proc in tree:
            # Reuse Process objects so cpu_percent() measures since the last sample.
            proc = self._procs.setdefault(proc.pid, proc)
            try:
                pss += _pss_bytes(proc)
                cpu += proc.cpu_percent(None)
            except psutil.Error:
                continue
        self.peak_pss_bytes = max(self.peak_pss_bytes, pss)
        self.cpu_percent_samples.append(cpu)

    def metrics(self) -> dict[str, float]:
        samples = self.cpu_percent_samples[1:]  # the first reading of each process is 0 by definition
        out: dict[str, float] = {"peak_pss_tree_bytes": float(self.peak_pss_bytes)}
        if samples:
            out["cpu_util_percent_mean"] = sum(samples) / len(samples)
            out["cpu_util_percent_max"] = max(samples)
        return out


def _pss_bytes(proc: psutil.Process) -> int:
    try:
        return proc.memory_full_info().pss
    except (psutil.AccessDenied, AttributeError):  # no smaps access: RSS is the honest fallback
        return proc.memory_info().rss


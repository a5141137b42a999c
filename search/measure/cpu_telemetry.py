"""CPU figures of a trial, sampled from outside its process tree with psutil.

Sampling from the sweep process sees the trial process, its DDP ranks and
its DataLoader workers together, which the trial cannot measure about
itself once the workers have exited. Memory is summed as PSS (proportional
set size): forked workers share most pages with their parent, and summing
their RSS would count those pages once per process.

Reading a process's PSS (/proc/<pid>/smaps_rollup) is not free for the
trial: the kernel walks the trial's page tables holding its memory-map lock,
which stalls the trial's own mmap/munmap (every large tensor allocation and
free) until the walk ends, and longer when the reader is preempted on a busy
machine. Read every 0.1 s it slowed digits trials by 15-30% on two loaded
cores (docs/BENCHMARKS.md, Service overhead). So PSS is read only when it
can be a new peak (summed RSS, a cheap read that takes no lock, bounds it
from above) and then at most 1% of the time, measured as the reads' own
duration, and every 2 s at most; a tree whose RSS grew by a tenth since the last read is read at
once, so a growing trial (a leak, the setup) is followed closely. RSS counts
the pages a trial shares with the forkserver (torch's) in full and PSS only its
share, so RSS stays above the peak PSS and the 2 s are what bounds the reads of
a trial at a steady size: read every 0.5 s, they left a digits trial at 0.971x,
0.975x, 0.981x and 0.998x its throughput without the sampler in four interleaved
A/Bs on 2 cores; every 2 s, 0.997x and 0.988x.
The tree itself (a scan of every process on the machine) is looked up every 0.5 s.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psutil

SAMPLE_INTERVAL_S = 0.1
TREE_SCAN_INTERVAL_S = 0.5
PSS_DUTY = 0.01  # the most of the trial's time spent reading its page tables
PSS_MIN_INTERVAL_S = 2.0  # and never more often than this while RSS holds still
PSS_GROWTH = 1.1  # summed RSS this many times that at the last PSS read: read PSS now


@dataclass
class TreeSampler:
    """Peak summed PSS and mean CPU utilisation of `pid` and all its descendants."""

    pid: int
    interval_s: float = SAMPLE_INTERVAL_S
    peak_pss_bytes: int = 0
    cpu_percent_samples: list[float] = field(default_factory=list)
    pss_reads: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _procs: dict[int, psutil.Process] = field(default_factory=dict)
    _scanned_at: float = float("-inf")
    _next_pss_at: float = float("-inf")
    _rss_at_pss_read: int = 0

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

    def _scan(self, now: float) -> bool:
        """Look the tree up again (new loader workers, DDP ranks); False when the trial is gone."""
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return False
        # Reuse Process objects so cpu_percent() measures since the last sample.
        self._procs = {p.pid: self._procs.get(p.pid, p) for p in tree}
        self._scanned_at = now
        return True

    def _sample(self) -> None:
        now = time.monotonic()
        if now - self._scanned_at >= TREE_SCAN_INTERVAL_S and not self._scan(now):
            return
        rss, cpu, alive = 0, 0.0, []
        for proc in self._procs.values():
            try:
                rss += proc.memory_info().rss
                cpu += proc.cpu_percent(None)
            except psutil.Error:
                continue
            alive.append(proc)
        if not alive:
            return
        self.cpu_percent_samples.append(cpu)
        if rss > self.peak_pss_bytes and (now >= self._next_pss_at or rss >= self._rss_at_pss_read * PSS_GROWTH):
            self._read_pss(alive, rss)

    def _read_pss(self, procs: list[psutil.Process], rss: int) -> None:
        started = time.monotonic()
        pss = 0
        for proc in procs:
            try:
                pss += _pss_bytes(proc)
            except psutil.Error:
                continue
        took = time.monotonic() - started
        self.pss_reads += 1
        self.peak_pss_bytes = max(self.peak_pss_bytes, pss)
        self._rss_at_pss_read = rss
        self._next_pss_at = started + max(PSS_MIN_INTERVAL_S, took / PSS_DUTY)

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

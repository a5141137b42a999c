"""The trial's memory and CPU, sampled from outside (search/measure/cpu_telemetry.py)."""
from __future__ import annotations

import subprocess
import sys
import time

from search.measure.cpu_telemetry import TreeSampler

GROW = """
import sys, time
held = []
for _ in range(8):
    held.append(bytearray(32 * 2**20))  # touched: bytearray zero-fills
    time.sleep(0.15)
print("grown", flush=True)
time.sleep(30)
"""


def test_a_growing_tree_is_followed_to_its_peak_and_a_steady_one_is_seldom_read():
    """PSS (a page-table walk that stalls the trial's mmap calls) is read while the tree grows,
    then only at the sampler's duty limit: far fewer reads than samples."""
    proc = subprocess.Popen([sys.executable, "-c", GROW], stdout=subprocess.PIPE, text=True)
    try:
        with TreeSampler(proc.pid) as sampler:
            assert proc.stdout.readline().strip() == "grown"
            time.sleep(0.3)
            reads_when_grown = sampler.pss_reads
            time.sleep(2.0)
            steady_reads = sampler.pss_reads - reads_when_grown
            samples = len(sampler.cpu_percent_samples)
    finally:
        proc.kill()
        proc.wait()
    assert sampler.peak_pss_bytes >= 200 * 2**20, sampler.peak_pss_bytes  # 256 MiB held
    assert reads_when_grown >= 3  # the growth was followed, not only its start
    assert steady_reads <= 2 < samples, (steady_reads, samples)  # 2 s at one read per 2 s at most
    assert sampler.metrics()["peak_pss_tree_bytes"] == float(sampler.peak_pss_bytes)

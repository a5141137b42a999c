"""The C heap of a trial process as a long-running training process has it.

glibc's malloc starts every process returning freed memory at the top of
its heap to the kernel once more than 128 KiB is free there, and serving
every block over 128 KiB with its own mmap. It raises both thresholds the
first time the process frees such a block (M_MMAP_THRESHOLD to that block's
size, at most 32 MiB, and M_TRIM_THRESHOLD to twice it), which a training
script that has loaded its data has long done before anyone times it. A
trial process is fresh and may never do it: its heap is then given back and
faulted in again, zeroed page by page, at every step. Measured on the
default digits trial (batch 64, one thread, 2-core VM): forked from a
process that had only imported torch, 1,208-1,359 samples/s; from one that
had freed three large blocks first, 1,435-1,537; in process after its
first trial, 1,529-1,580; with these thresholds set, through the sweep's
own run path, 1,523-1,563 (docs/BENCHMARKS.md, service overhead). So each
trial process, and each DDP rank, starts where glibc's own adaptation tops
out, and the trial measures the configuration, not the freshness of its
process.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import platform

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: where glibc's adaptation stops
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES  # as glibc sets it when it raises the mmap threshold


def warm_allocator() -> bool:
    """Set glibc malloc's thresholds as a warm process has them; False where the C library is not glibc."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False

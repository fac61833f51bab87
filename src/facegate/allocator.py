"""Memory allocator tuning for frame-sized buffers (glibc).

By default glibc serves an allocation above its mmap threshold (128 KiB at start, raised
as such blocks are freed, up to 32 MiB) with fresh pages from ``mmap``, hands them back to
the kernel on ``free``, and trims the heap top above 128 KiB. Image work allocates and
frees many region- and frame-sized numpy/OpenCV buffers per frame, so each frame faults
its pages in anew, and the kernel zeroes every one. On the development VM that was a
quarter of a face swap's time (``benchmarks/engine_bench.py`` against its
``--default-allocator`` run: swap 12.9-14.5 -> 9.8-11.8 ms, one-face 1080p frame
26.9-29.3 -> 22.9-26.6 ms; the colour and blend stages alone take half as long).

:func:`tune_allocator` pins both thresholds, so those buffers come from the heap and their
memory is reused while the process runs. The price is resident memory: up to
``TRIM_THRESHOLD`` of freed memory may stay with the process instead of going back to the
system. Every ``facegate`` command applies it at start-up; an operator who sets glibc's own
``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` keeps those instead.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: Blocks below this come from the heap (a 4K BGR frame is 24 MiB; 32 MiB is the most
#: glibc accepts on every 64-bit build).
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Free memory at the heap's top kept for reuse before it is returned to the system.
TRIM_THRESHOLD = 128 * 1024 * 1024

# mallopt(3) parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_OPERATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def tune_allocator() -> bool:
    """Pin glibc's mmap and trim thresholds for this process. True when applied; False on
    another C library or platform, or when the operator set glibc's own variables."""
    if not sys.platform.startswith("linux") or any(v in os.environ for v in _OPERATOR_VARIABLES):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # this process's C library
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )

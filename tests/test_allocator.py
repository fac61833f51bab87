"""facegate.allocator: frame-sized blocks come from the reused heap once tuned.

Each case runs in a fresh interpreter: the tuning is process-wide and cannot be undone."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

# Allocates and frees an 8 MiB block through the C library, and prints whether glibc
# served it with its own mmap (mallinfo2's hblks counts such blocks while they live).
PROBE = """
import ctypes, sys
from facegate.allocator import tune_allocator
tuned = tune_allocator() if sys.argv[1] == "tune" else False
libc = ctypes.CDLL(None)
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
before = libc.mallinfo2().hblks
block = libc.malloc(8 * 1024 * 1024)
mapped = libc.mallinfo2().hblks > before
libc.free(block)
print(tuned, mapped)
"""

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="glibc only (elsewhere tune_allocator does nothing and says so)",
)


def probe(mode: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        env={**environment, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout.strip()


@glibc
def test_a_frame_sized_block_is_mapped_by_default_and_heap_served_once_tuned() -> None:
    assert probe("default") == "False True"
    assert probe("tune") == "True False"


@glibc
def test_the_operators_own_glibc_settings_win() -> None:
    # glibc reads MALLOC_MMAP_THRESHOLD_ itself; tune_allocator leaves it alone.
    assert probe("tune", MALLOC_MMAP_THRESHOLD_="1048576") == "False True"

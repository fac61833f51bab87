"""What this machine offers a worker: its memory and its cores, as the kernel will enforce
them.

A container's limit (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``) is what the
OOM killer acts on, so it wins over the machine's ``MemTotal`` when it is lower.
"""

from __future__ import annotations

import os
from pathlib import Path

#: A worker's default memory budget is this share of the memory it may use: the rest is the
#: process's own (interpreter, loaded models, the allocator's retained heap) and headroom.
DEFAULT_BUDGET_SHARE = 0.75
_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)
_MEMINFO = Path("/proc/meminfo")
#: Where neither can be read (not Linux): a figure that leaves a small machine whole.
FALLBACK_MEMORY_BYTES = 4 * 2**30


def machine_memory_bytes(
    meminfo: Path = _MEMINFO, cgroup_limits: tuple[Path, ...] = _CGROUP_LIMITS
) -> int:
    """The memory this process may use: the machine's, or its container's limit if lower."""
    total = _meminfo_total(meminfo)
    for path in cgroup_limits:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # "max" (v2) or a huge number (v1): no limit
            total = min(total, int(text))
    return total


def default_memory_budget(memory_bytes: int | None = None) -> int:
    """:data:`DEFAULT_BUDGET_SHARE` of ``memory_bytes`` (default: this machine's)."""
    memory = machine_memory_bytes() if memory_bytes is None else memory_bytes
    return int(memory * DEFAULT_BUDGET_SHARE)


def _meminfo_total(meminfo: Path) -> int:
    try:
        lines = meminfo.read_text().splitlines()
    except OSError:
        return FALLBACK_MEMORY_BYTES
    for line in lines:
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return FALLBACK_MEMORY_BYTES


_CGROUP_CPU_V2 = Path("/sys/fs/cgroup/cpu.max")
_CGROUP_CPU_V1 = (
    Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
    Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
)


def machine_cores(cpu_max: Path = _CGROUP_CPU_V2, cfs: tuple[Path, Path] = _CGROUP_CPU_V1) -> float:
    """The cores this process may use: the CPUs it may run on, or its container's CPU
    limit (cgroup v2 ``cpu.max``, v1 the CFS quota over its period) if lower."""
    cores = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    quota: tuple[str, str] | None = None
    try:
        parts = cpu_max.read_text().split()
        quota = (parts[0], parts[1]) if len(parts) == 2 else None
    except OSError:
        try:
            quota = (cfs[0].read_text().strip(), cfs[1].read_text().strip())
        except OSError:
            quota = None
    if quota is not None and quota[0].isdigit() and quota[1].isdigit() and int(quota[1]) > 0:
        cores = min(cores, int(quota[0]) / int(quota[1]))
    return cores

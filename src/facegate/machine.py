"""What this machine offers a worker: its memory, as the kernel will enforce it.

A container's limit (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``) is what the
OOM killer acts on, so it wins over the machine's ``MemTotal`` when it is lower.
"""

from __future__ import annotations

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

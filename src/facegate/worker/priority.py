"""The CPU priority (nice) of job work: lowered so the API, live streams and the short-job
lane win the CPU from long jobs (docs/scheduling.md, docs/live.md).

On Linux a nice value belongs to a thread, and a new thread inherits its creator's: so a
process lowers every thread it already has (an imported library's pools, the interpreter's
helpers), and a worker thread of the API process (the embedded threads shape) lowers only
itself, the threads it starts for a job (a video's pipeline) inheriting it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

#: the highest nice value (the lowest priority)
NICEST = 19
_TASKS = Path("/proc/self/task")


def _lower(thread_id: int, nice: int) -> None:
    """Add ``nice`` to one thread's niceness (Linux: PRIO_PROCESS with a thread id)."""
    try:
        now = os.getpriority(os.PRIO_PROCESS, thread_id)
        os.setpriority(os.PRIO_PROCESS, thread_id, min(NICEST, now + nice))
    except ProcessLookupError:
        pass  # the thread ended meanwhile


def lower_thread_priority(nice: int) -> None:
    """Add ``nice`` to the calling thread's niceness (and so to every thread it starts)."""
    if nice > 0:
        _lower(threading.get_native_id(), nice)


def lower_priority(nice: int) -> None:
    """Add ``nice`` to every thread of this process, and so to every thread started
    afterwards (a worker process's first step)."""
    if nice <= 0:
        return
    if not _TASKS.is_dir():  # not Linux: a process's nice is the process's
        os.nice(nice)
        return
    for task in _TASKS.iterdir():
        _lower(int(task.name), nice)

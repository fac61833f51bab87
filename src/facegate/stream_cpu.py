"""The CPU of this process's live streams: a core budget that paces them
(``FACEGATE_STREAM_CORES``) while job work runs on this node.

The budget holds only while jobs run in this process's workers or in ``serve``'s worker
children (each registers a probe with :meth:`StreamCpu.watch_jobs`): a stream with no job
beside it takes every core it can use. Once a job starts, the next frame is paced again
(the probes are read before every frame; the children's report each 0.1 s).

While it holds, the process's CPU (all its threads: the streams' engine threads, the
receivers' decoders and the senders' encoders, the event loop) over the last ``window``
seconds is kept within the budget: before a stream's engine takes its next frame it waits
until the process is back within it. Camera frames that
arrive meanwhile replace each other (drop, never queue), so the wait lowers the frame rate,
never the latency of the frame taken (and never below 2 frames a second: a frame is held at
most ``MAX_HOLD_SECONDS``). What the budget leaves is the jobs' (their worker processes run
beside the API process in ``facegate serve``).

Stdlib only, as ``stream_registry`` (``AppState`` holds it).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

#: the budget is kept over this many seconds of the process's CPU
WINDOW_SECONDS = 0.5
#: one wait is at most this long before the process's CPU is read again
MAX_WAIT_SECONDS = 0.1
#: a shorter wait than this is none
MIN_WAIT_SECONDS = 0.001
#: a stream's next frame is never held longer than this (it keeps 2 frames a second even
#: when the process's other work alone is over the budget)
MAX_HOLD_SECONDS = 0.5


class CorePacer:
    """How long to wait so that the process's CPU over the last ``window`` seconds stays
    within ``cores`` (``clock``: wall seconds, ``cpu``: the process's CPU seconds)."""

    def __init__(
        self,
        cores: float,
        window: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self.cores = cores
        self.window = window
        self.clock = clock
        self.cpu = cpu
        self._samples: deque[tuple[float, float]] = deque()

    def delay(self) -> float:
        """Seconds to wait before more work (0: within the budget now)."""
        now, used = self.clock(), self.cpu()
        samples = self._samples
        samples.append((now, used))
        # keep the newest sample at least a window old as the reference
        while len(samples) > 2 and now - samples[1][0] >= self.window:
            samples.popleft()
        since, used_then = samples[0]
        if now - since < self.window / 4:
            return 0.0  # too short a span to tell a rate from
        wait = (used - used_then) / self.cores - (now - since)
        return wait if wait >= MIN_WAIT_SECONDS else 0.0


#: what says how many jobs run on this node now (a worker pool's, serve's children's)
JobsProbe = Callable[[], int]


class StreamCpu:
    """This process's streams' core budget (held while job work runs on this node)."""

    def __init__(
        self, cores: float, window: float = WINDOW_SECONDS, cpu: Callable[[], float] | None = None
    ) -> None:
        self.cores = cores
        self._own_cpu = cpu or time.process_time
        #: CPU counted as this process's beside its own (the streams' engine children)
        self._more_cpu: list[Callable[[], float]] = []
        self.pacer = CorePacer(cores, window, cpu=self._cpu)
        self._probes: list[JobsProbe] = []

    def _cpu(self) -> float:
        return self._own_cpu() + sum(more() for more in self._more_cpu)

    def count_cpu(self, seconds: Callable[[], float]) -> None:
        """Count ``seconds()`` (CPU seconds, never decreasing) in the streams' CPU too."""
        self._more_cpu.append(seconds)

    def watch_jobs(self, probe: JobsProbe) -> Callable[[], None]:
        """Hold the budget while ``probe()`` > 0; the function that stops watching it."""
        self._probes.append(probe)
        return lambda: self._probes.remove(probe)

    def jobs_running(self) -> bool:
        """Whether job work runs on this node now (a probe that fails counts as running)."""
        for probe in list(self._probes):
            try:
                if probe() > 0:
                    return True
            except Exception:
                return True
        return False

    async def pace(self) -> float:
        """Wait (on the event loop) until the process is within its streams' budget, at
        most ``MAX_HOLD_SECONDS``, when job work runs on this node; the seconds waited."""
        if not self.jobs_running():
            self.pacer.delay()  # the window stays current for when a job starts
            return 0.0
        waited = 0.0
        while waited < MAX_HOLD_SECONDS and (wait := self.pacer.delay()) > 0:
            step = min(wait, MAX_WAIT_SECONDS, MAX_HOLD_SECONDS - waited)
            await asyncio.sleep(step)
            waited += step
        return waited

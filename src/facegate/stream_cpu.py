"""The CPU of this process's live streams: a core budget that paces them
(``FACEGATE_STREAM_CORES``).

While streams run, the process's CPU (all its threads: the streams' engine threads, the
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


class StreamCpu:
    """This process's streams' core budget."""

    def __init__(self, cores: float, window: float = WINDOW_SECONDS) -> None:
        self.cores = cores
        self.pacer = CorePacer(cores, window)

    async def pace(self) -> float:
        """Wait (on the event loop) until the process is within its streams' budget, at
        most ``MAX_HOLD_SECONDS``; the seconds waited."""
        waited = 0.0
        while waited < MAX_HOLD_SECONDS and (wait := self.pacer.delay()) > 0:
            step = min(wait, MAX_WAIT_SECONDS, MAX_HOLD_SECONDS - waited)
            await asyncio.sleep(step)
            waited += step
        return waited

"""The live streams of this process, by id and tenant: the concurrency cap is counted here
(one event loop admits them, so the check and the insert cannot interleave), and what
``GET /v1/streams`` answers (a stream that ended stays readable for a while, with why).

Pure state: no aiortc, no engine (and outside ``streams/``, as ``moderation_policy`` is
outside ``worker/``: ``AppState`` holds it, and the streams package uses the jobs', which
use ``AppState``). A running stream puts its ``stop`` here so that a
``DELETE`` (or the shutdown of the process) can end it."""

from __future__ import annotations

import math
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from facegate.database import utcnow
from facegate.errors import NotFound, QuotaExceeded, Unavailable
from facegate.machine import machine_cores
from facegate.stream_cpu import StreamCpu

StreamState = Literal["live", "ended"]
#: how many ended streams stay readable (GET) per process, newest kept
KEEP_ENDED = 1000
_WINDOW = 2.0  # seconds of output the fps is measured over


@dataclass
class StreamStats:
    """What a running stream counted: frames in, out and dropped (a newer camera frame
    came before the engine took the last one), the engine's seconds, and per output
    frame the time from its camera frame's arrival to its swapped frame being ready."""

    frames_in: int = 0
    frames_out: int = 0
    frames_dropped: int = 0
    compute_seconds: float = 0.0
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=150))
    out_times: deque[float] = field(default_factory=lambda: deque(maxlen=300))
    last_input_at: float = field(default_factory=time.monotonic)
    stages: dict[str, deque[float]] = field(default_factory=dict)

    def frame_in(self) -> None:
        self.frames_in += 1
        self.last_input_at = time.monotonic()

    def frame_out(self, arrived: float, compute: float) -> None:
        now = time.monotonic()
        self.frames_out += 1
        self.compute_seconds += compute
        self.latencies.append(now - arrived)
        self.out_times.append(now)

    def stage(self, name: str, seconds: float) -> None:
        """One frame's time in a stage of the server's path (``StreamOut.stages_ms``)."""
        found = self.stages.get(name)
        if found is None:
            found = self.stages[name] = deque(maxlen=150)
        found.append(seconds)

    def stages_ms(self) -> dict[str, dict[str, float]]:
        """Per stage, p50 and p95 of the recent frames, in milliseconds."""
        return {
            name: {"p50": _ms(_quantile(values, 0.5)), "p95": _ms(_quantile(values, 0.95))}
            for name, values in list(self.stages.items())  # the engine thread adds to it
            if values
        }

    def fps(self) -> float:
        now = time.monotonic()
        recent = [t for t in self.out_times if now - t <= _WINDOW]
        return round(len(recent) / _WINDOW, 1)

    def latency_ms(self) -> float | None:
        """p95 of the recent frames' server-side latency, in milliseconds."""
        if not self.latencies:
            return None
        return _ms(_quantile(self.latencies, 0.95))


def _quantile(values: deque[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


@dataclass
class StreamRecord:
    """One stream as the API shows it."""

    id: uuid.UUID
    tenant_id: str
    actor: str
    max_seconds: int
    created_at: datetime = field(default_factory=utcnow)
    started: float = field(default_factory=time.monotonic)
    state: StreamState = "live"
    ended_at: datetime | None = None
    ended: float | None = None
    end_reason: str | None = None
    end_detail: str | None = None
    width: int | None = None
    height: int | None = None
    stats: StreamStats = field(default_factory=StreamStats)
    stop: Callable[[str, str | None], Awaitable[None]] | None = field(default=None, repr=False)

    @property
    def seconds(self) -> float:
        """Seconds live: from the answer to the end (or to now)."""
        return round((self.ended or time.monotonic()) - self.started, 3)


class StreamRegistry:
    """This process's streams (``AppState.streams``)."""

    def __init__(
        self,
        capacity: int = 2,
        keep_ended: int = KEEP_ENDED,
        cores: float | None = None,
        min_cores: float = 0.5,
    ) -> None:
        self.capacity = capacity
        #: the streams' core budget (``stream_cores``), and the share each admitted
        #: stream is counted at (``stream_min_cores``)
        self.cpu = StreamCpu(machine_cores() if cores is None else cores)
        self.min_cores = min_cores
        self._live: dict[uuid.UUID, StreamRecord] = {}
        self._ended: OrderedDict[uuid.UUID, StreamRecord] = OrderedDict()
        self._keep_ended = keep_ended

    def check(self, tenant_id: str, max_concurrent: int) -> None:
        """429 naming ``max_concurrent_streams`` when the tenant runs that many already;
        503 when this process runs its ``streams_per_process`` (any tenants'), or when its
        streams' core budget (``stream_cores``) cannot give one more ``stream_min_cores``."""
        running = len(self.live(tenant_id))
        if running >= max_concurrent:
            raise QuotaExceeded(
                f"this tenant already runs {running} live stream(s), its maximum "
                f"(max_concurrent_streams {max_concurrent}); end one first",
                limit="max_concurrent_streams",
                value=max_concurrent,
                retry_after=5,
            )
        if len(self._live) >= self.capacity:
            raise Unavailable(
                f"this server runs its maximum of {self.capacity} live streams; try again shortly",
                limit="streams_per_process",
                limit_value=self.capacity,
                retry_after=10,
            )
        cores = self.cpu.cores
        if (len(self._live) + 1) * self.min_cores > cores + 1e-9:
            raise Unavailable(
                f"this server's live streams may take {cores:g} cores together "
                f"(stream_cores), {self.min_cores:g} for each; it runs {len(self._live)}, "
                "the rest is kept for jobs; try again shortly",
                limit="stream_cores",
                limit_value=cores,
                retry_after=10,
            )

    def room(self) -> int:
        """How many more streams this process would admit now, whatever their tenants'
        caps (``check``'s two process limits)."""
        by_cores = math.floor((self.cpu.cores + 1e-9) / self.min_cores)
        return max(0, min(self.capacity, by_cores) - len(self._live))

    def admit(self, record: StreamRecord, max_concurrent: int) -> None:
        """Count ``record`` among its tenant's live streams, within ``max_concurrent``."""
        self.check(record.tenant_id, max_concurrent)
        self._live[record.id] = record

    def withdraw(self, record: StreamRecord) -> None:
        """``record`` never started (its opening failed): forgotten."""
        self._live.pop(record.id, None)

    def live(self, tenant_id: str | None = None) -> list[StreamRecord]:
        return [r for r in self._live.values() if tenant_id is None or r.tenant_id == tenant_id]

    def release(self, record: StreamRecord) -> None:
        """``record`` ended: no longer counted, still readable."""
        self._live.pop(record.id, None)
        self._ended[record.id] = record
        while len(self._ended) > self._keep_ended:
            self._ended.popitem(last=False)

    def get(self, tenant_id: str, stream_id: uuid.UUID) -> StreamRecord:
        """The tenant's stream; another tenant's is missing, as everywhere (404)."""
        record = self._live.get(stream_id) or self._ended.get(stream_id)
        if record is None or record.tenant_id != tenant_id:
            raise NotFound(f"no stream {stream_id}")
        return record

    def of_tenant(self, tenant_id: str) -> list[StreamRecord]:
        """Live first, then ended, newest first within each."""
        ended = [r for r in reversed(self._ended.values()) if r.tenant_id == tenant_id]
        live = sorted(self.live(tenant_id), key=lambda r: r.created_at, reverse=True)
        return live + ended

    async def stop_all(self, reason: str) -> None:
        """End every live stream (the process is stopping)."""
        for record in list(self._live.values()):
            if record.stop is not None:
                await record.stop(reason, None)

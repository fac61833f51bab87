"""The service's Prometheus metrics and the helpers that update them.

Names follow Prometheus conventions: ``facegate_<noun>_<unit>``, counters end in
``_total``, durations are seconds. With ``PROMETHEUS_MULTIPROC_DIR`` set (several server or
worker processes), prometheus_client keeps every value in a per-process file and
:func:`exposition` merges them at scrape time; the queued/running gauges are not kept by
any process at all but read from the database when scraped (``jobs.gauges``), so they are
right whichever process serves the scrape.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from facegate.observability.labels import tenant_label

HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
JOB_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
LOAD_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: Recogniser distances (dlib's: the same person under 0.6).
IDENTITY_BUCKETS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)

HTTP_REQUESTS = Counter(
    "facegate_http_requests_total",
    "HTTP requests by route template, method and status code.",
    ["route", "method", "status"],
)
HTTP_DURATION = Histogram(
    "facegate_http_request_duration_seconds",
    "HTTP request latency by route template and method.",
    ["route", "method"],
    buckets=HTTP_BUCKETS,
)
JOBS_SUBMITTED = Counter(
    "facegate_jobs_submitted_total", "Jobs accepted into the queue.", ["tenant", "kind"]
)
JOBS_FINISHED = Counter(
    "facegate_jobs_finished_total",
    "Jobs that reached a terminal status.",
    ["tenant", "kind", "status"],
)
JOB_DURATION = Histogram(
    "facegate_job_duration_seconds",
    "Time from claim to terminal status.",
    ["kind", "status"],
    buckets=JOB_BUCKETS,
)
SWAP_IDENTITY = Histogram(
    "facegate_swap_identity_distance",
    "Recogniser distance of each swapped face to its source (engine.report; the same "
    "person under 0.6), by tenant and verdict.",
    ["tenant", "verdict"],
    buckets=IDENTITY_BUCKETS,
)
JOB_QUEUE_WAIT = Histogram(
    "facegate_job_queue_wait_seconds",
    "Time a job waited in the queue before a worker claimed it.",
    ["tenant"],
    buckets=WAIT_BUCKETS,
)
COMPUTE_SECONDS = Counter(
    "facegate_compute_seconds_total",
    "Processing seconds spent on jobs by device type (the GPU-seconds of billing).",
    ["tenant", "device"],
)
OUTPUT_PIXELS = Counter(
    "facegate_output_pixels_total", "Pixels written to results (all frames).", ["tenant"]
)
RATE_LIMITED = Counter(
    "facegate_rate_limited_requests_total",
    "Requests refused by a rate limit; limit is the bucket that was full (tenant, ip...).",
    ["tenant", "limit"],
)
TAKEDOWN_SECONDS = Histogram(
    "facegate_takedown_seconds",
    "Time from a takedown case's report to the removal of what it matched (48 h: the law).",
    buckets=(60, 600, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 36 * 3600, 48 * 3600, 96 * 3600),
)
TAKEDOWN_REFUSED = Counter(
    "facegate_takedown_refused_uploads_total",
    "Sources refused because their image or face was taken down.",
)
BANNED = Counter("facegate_banned_requests_total", "Requests refused because the IP is banned.")
MODEL_LOAD = Histogram(
    "facegate_model_load_seconds",
    "Time to load a model into the inference pool.",
    ["kind"],
    buckets=LOAD_BUCKETS,
)
MODERATION_DECISIONS = Counter(
    "facegate_moderation_decisions_total",
    "Content moderation decisions: one per checked input or output (allowed / refused), "
    "one per job of a tenant whose moderation is off (disabled).",
    ["tenant", "decision"],
)
STREAM_SECONDS = Counter(
    "facegate_stream_seconds_total",
    "Seconds of live streams (metered while they run, as usage bills them).",
    ["tenant"],
)
STREAM_FRAMES = Counter(
    "facegate_stream_frames_total",
    "Camera frames of live streams: swapped and sent (out), or skipped under load (dropped).",
    ["tenant", "outcome"],
)
STREAMS_LIVE = Gauge(
    "facegate_streams_live",
    "Live streams running now.",
    ["tenant"],
    multiprocess_mode="livesum",
)
STREAMS_ENDED = Counter(
    "facegate_streams_ended_total", "Live streams that ended, by reason.", ["tenant", "reason"]
)
STREAM_PLACEMENTS = Counter(
    "facegate_stream_placements_total",
    "Stream starts this process had no room for, handed to a peer: handed (the peer "
    "answered), full (it had filled up), unreachable.",
    ["outcome"],
)
WORKER_HEARTBEAT = Gauge(
    "facegate_worker_heartbeat_timestamp_seconds",
    "Unix time of the last maintenance pass of this process's worker pool.",
    multiprocess_mode="max",
)


def job_submitted(tenant_id: str, kind: str) -> None:
    JOBS_SUBMITTED.labels(tenant_label(tenant_id), kind).inc()


def job_finished(
    tenant_id: str,
    kind: str,
    status: str,
    *,
    queue_wait_seconds: float | None,
    duration_seconds: float | None,
    compute_seconds: float,
    device: str,
    output_pixels: int,
) -> None:
    """Everything a worker records about one job when it reaches a terminal status."""
    tenant = tenant_label(tenant_id)
    JOBS_FINISHED.labels(tenant, kind, status).inc()
    if queue_wait_seconds is not None:
        JOB_QUEUE_WAIT.labels(tenant).observe(max(0.0, queue_wait_seconds))
    if duration_seconds is not None:
        JOB_DURATION.labels(kind, status).observe(max(0.0, duration_seconds))
    if compute_seconds > 0:
        COMPUTE_SECONDS.labels(tenant, device).inc(compute_seconds)
    if output_pixels > 0:
        OUTPUT_PIXELS.labels(tenant).inc(output_pixels)


def request_rate_limited(tenant_id: str | None, limit: str) -> None:
    """Called by the rate limiter when it refuses a request."""
    RATE_LIMITED.labels(tenant_label(tenant_id), limit).inc()


def request_banned() -> None:
    """Called when a request from a banned IP is refused."""
    BANNED.inc()


def moderation_decision(tenant_id: str, decision: str) -> None:
    MODERATION_DECISIONS.labels(tenant_label(tenant_id), decision).inc()


def stream_started(tenant_id: str) -> None:
    STREAMS_LIVE.labels(tenant_label(tenant_id)).inc()


def stream_progress(tenant_id: str, seconds: float, frames_out: int, frames_dropped: int) -> None:
    """What a live stream ran since its last report."""
    tenant = tenant_label(tenant_id)
    if seconds > 0:
        STREAM_SECONDS.labels(tenant).inc(seconds)
    if frames_out:
        STREAM_FRAMES.labels(tenant, "out").inc(frames_out)
    if frames_dropped:
        STREAM_FRAMES.labels(tenant, "dropped").inc(frames_dropped)


def stream_ended(tenant_id: str, reason: str) -> None:
    tenant = tenant_label(tenant_id)
    STREAMS_LIVE.labels(tenant).dec()
    STREAMS_ENDED.labels(tenant, reason).inc()


def stream_lost(tenant_id: str, reason: str) -> None:
    """A stream of a process that died, ended by this one's sweep (its live gauge went
    with the dead process)."""
    STREAMS_ENDED.labels(tenant_label(tenant_id), reason).inc()


def stream_placement(outcome: str) -> None:
    STREAM_PLACEMENTS.labels(outcome).inc()


def model_loaded(kind: str, seconds: float) -> None:
    MODEL_LOAD.labels(kind).observe(seconds)


def worker_heartbeat() -> None:
    WORKER_HEARTBEAT.set(time.time())


class _DefaultRegistry(Collector):
    """This process's own metrics (single-process mode)."""

    def collect(self) -> Iterable[object]:  # type: ignore[override]
        return REGISTRY.collect()


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition(extra: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The text exposition of every metric, merged across processes when multiprocess mode
    is on, plus ``extra`` collectors evaluated now (the database gauges)."""
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess_dir():
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_DefaultRegistry())
    for collector in extra:
        registry.register(collector)
    return generate_latest(registry), CONTENT_TYPE_LATEST


def observe_swap_quality(tenant: str, reports: Iterable[tuple[float, str]]) -> None:
    """Each swapped face's (distance to the source, verdict) into ``SWAP_IDENTITY``."""
    label = tenant_label(tenant)
    for distance, verdict in reports:
        SWAP_IDENTITY.labels(label, verdict).observe(distance)

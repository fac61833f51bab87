"""A JobRunner for the queue's acceptance tests and benchmark: it does no image work, so
hundreds of jobs run in seconds, and it logs every start and end so a test can prove that
each job ran to completion exactly once and that no tenant ever ran over its cap.

Loaded by real ``facegate worker`` processes through ``--runner cheap_runner:CheapRunner``
(FACEGATE_WORKER_RUNNER); everything around it — claim, leases, storage of the output,
the job's terminal status — is the production path.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import zlib
from pathlib import Path

from facegate.engine.errors import Cancelled
from facegate.jobs.tables import Job
from facegate.provenance.marker import JobMark
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy
from facegate.worker.output import JobOutput, ProgressFn

DEFAULT_SECONDS = 0.02


def tiny_png() -> bytes:
    """A valid 1x1 grey PNG, built by hand (no codec import in the worker)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    pixels = zlib.compress(b"\x00\x80")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def log_event(event: str, job: Job) -> None:
    path = os.environ.get("FACEGATE_TEST_RUN_LOG")
    if not path:
        return
    line = f"{event} {job.id} {job.tenant_id} {os.getpid()} {time.time():.6f}\n"
    # One write() of a short line on an O_APPEND file: lines of concurrent workers never
    # interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class CheapRunner:
    """Sleeps ``spec['test_seconds']`` (default 20 ms), honouring cancel, then returns a
    1x1 PNG. With ``spec['test_scratch']`` it first writes a partial file into a temporary
    folder, as a video job does with its target copy (left behind if it is killed)."""

    def __init__(self, tenant_store: TenantStore) -> None:
        self.tenant_store = tenant_store

    def run(
        self,
        job: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> JobOutput:
        started = time.perf_counter()
        log_event("start", job)
        seconds = float(job.spec.get("test_seconds", DEFAULT_SECONDS))
        if job.spec.get("test_scratch"):
            folder = Path(tempfile.mkdtemp(prefix="facegate-video-"))
            (folder / "target").write_bytes(b"\0" * 4096)
            log_event("scratch", job)
        on_progress(0.0, "run")
        if cancel.wait(seconds):
            log_event("cancelled", job)
            raise Cancelled("the job was cancelled")
        log_event("end", job)
        return JobOutput(
            data=tiny_png(),
            format="png",
            width=1,
            height=1,
            frames=1,
            compute_seconds=time.perf_counter() - started,
        )

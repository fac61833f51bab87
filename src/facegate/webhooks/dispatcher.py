"""The worker side of webhooks: fan job events out into deliveries, then send the due
deliveries, each attempt recorded on its row (the tenant's delivery log).

Everything lives in the database, so deliveries survive restarts: a claimed delivery's next
attempt is pushed one lease ahead before it is sent, and a dispatcher that dies mid-send
leaves it to be sent again when that lease runs out (receivers dedupe on ``webhook-id``).
Several dispatchers (the cluster's workers) share the tables: PostgreSQL hands each its own
rows (``SKIP LOCKED``), SQLite serialises them.
"""

from __future__ import annotations

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import structlog
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from facegate.batches.repository import BatchRepository
from facegate.batches.schemas import BatchOut
from facegate.database import session_scope, utcnow
from facegate.jobs.repository import JobRepository
from facegate.jobs.tables import Job
from facegate.settings import Settings
from facegate.webhooks.addresses import (
    AddressRefused,
    IPNetwork,
    Resolver,
    destination,
    parse_networks,
)
from facegate.webhooks.repository import WebhookRepository
from facegate.webhooks.signing import signed_headers
from facegate.webhooks.tables import BATCH_COMPLETED, WebhookDelivery
from facegate.webhooks.transport import Attempt, WebhookSender

log = structlog.get_logger("facegate.webhooks")

MAX_BACKOFF_SECONDS = 6 * 3600.0


@dataclass(frozen=True)
class DeliveryConfig:
    allowed_networks: tuple[IPNetwork, ...] = ()
    timeout_seconds: float = 5.0
    max_attempts: int = 8
    # Attempt n (1-based) that failed waits base * 4**(n-1): 5 s, 20 s, 80 s, ... 6 h at most.
    retry_base_seconds: float = 5.0
    poll_seconds: float = 1.0
    lease_seconds: float = 60.0
    batch: int = 50
    senders: int = 4

    @classmethod
    def from_settings(cls, settings: Settings) -> DeliveryConfig:
        return cls(
            allowed_networks=parse_networks(settings.webhook_allowed_networks),
            timeout_seconds=settings.webhook_timeout_seconds,
            max_attempts=settings.webhook_max_attempts,
            retry_base_seconds=settings.webhook_retry_base_seconds,
            poll_seconds=settings.webhook_poll_seconds,
        )

    def backoff(self, attempts: int) -> timedelta:
        seconds = self.retry_base_seconds * 4 ** max(0, attempts - 1)
        return timedelta(seconds=min(seconds, MAX_BACKOFF_SECONDS))


def job_event_body(event_type: str, job: Job) -> str:
    """The message of a job event: ``{"type", "timestamp", "data"}`` (Standard Webhooks'
    payload shape), the job as its owner reads it, without inputs or options."""
    finished = job.finished_at or utcnow()
    data: dict[str, Any] = {
        "id": str(job.id),
        "status": job.status,
        "kind": job.kind,
        "created_at": job.created_at.isoformat(),
        "finished_at": finished.isoformat(),
        "error": ({"type": job.error_type, "detail": job.error_detail} if job.error_type else None),
        "result": f"/v1/jobs/{job.id}/result" if job.status == "succeeded" else None,
    }
    message = {"type": event_type, "timestamp": finished.isoformat(), "data": data}
    return json.dumps(message, separators=(",", ":"), sort_keys=True)


class WebhookDispatcher:
    """Fans out and sends; :meth:`run_once` is one round (tests drive it without threads)."""

    def __init__(
        self,
        engine: Engine,
        config: DeliveryConfig | None = None,
        *,
        resolver: Resolver | None = None,
    ) -> None:
        self.config = config or DeliveryConfig()
        self.sessions: sessionmaker[Session] = sessionmaker(
            bind=engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
        )
        self.resolver = resolver
        self.sender = WebhookSender(self.config.timeout_seconds)
        self._pool = ThreadPoolExecutor(self.config.senders, thread_name_prefix="webhook-send")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="webhook-dispatcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._pool.shutdown(wait=True)
        self.sender.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.run_once()
            except Exception:
                log.exception("webhook.dispatcher_error")
                busy = 0
            if not busy:
                self._stop.wait(self.config.poll_seconds)

    # one round
    def run_once(self) -> int:
        """Fan out waiting events, send the due deliveries; how many rows it handled."""
        return self.fan_out() + self.deliver_due()

    def fan_out(self) -> int:
        """Each job event becomes a delivery per subscribed endpoint; the event of a
        batch's last item also queues ``batch.completed`` (once: the batch is marked)."""
        now = utcnow()
        with session_scope(self.sessions) as session:
            repository = WebhookRepository(session)
            events = repository.take_events(self.config.batch)
            jobs, batches = JobRepository(session), BatchRepository(session)
            for event in events:
                job = jobs.get(event.tenant_id, event.job_id)
                if job is None:  # deleted with its tenant since
                    continue
                body = job_event_body(event.event_type, job)
                _queue(repository, event.tenant_id, event.event_type, body, job.id, now)
                batch_id = batches.batch_of(event.tenant_id, job.id)
                if batch_id is None:
                    continue
                batch = batches.get(event.tenant_id, batch_id)
                items = batches.items(event.tenant_id, batch_id)
                if batch is None or not all(item_job.is_terminal for _, item_job in items):
                    continue
                if batches.mark_completed(event.tenant_id, batch_id, now):
                    body = batch_event_body(BatchOut.of(batch, items))
                    _queue(repository, event.tenant_id, BATCH_COMPLETED, body, None, now)
            repository.drop_events([event.id for event in events])
        return len(events)

    def deliver_due(self) -> int:
        now = utcnow()
        with session_scope(self.sessions) as session:
            due = WebhookRepository(session).take_due(now, self.config.batch)
            claimed = []
            for delivery in due:
                delivery.attempts += 1
                delivery.next_attempt_at = now + timedelta(seconds=self.config.lease_seconds)
                claimed.append(delivery.id)
        list(self._pool.map(self._attempt, claimed))
        return len(claimed)

    # one delivery
    def _attempt(self, delivery_id: uuid.UUID) -> None:
        now = utcnow()
        with session_scope(self.sessions, read_only=True) as session:
            repository = WebhookRepository(session)
            delivery = repository.delivery(delivery_id)
            if delivery is None:
                return
            endpoint = (
                repository.endpoint_by_id(delivery.endpoint_id) if delivery.endpoint_id else None
            )
            secrets = endpoint.signing_secrets(now) if endpoint is not None else []
            tenant_id, url, body = delivery.tenant_id, delivery.url, delivery.body.encode()
            message_id, event_type = delivery.message_id, delivery.event_type
        bound = log.bind(
            tenant_id=tenant_id,
            delivery_id=str(delivery_id),
            event_type=event_type,
            host=_host(url),
        )
        if not secrets:
            self._record(delivery_id, None, "the endpoint was deleted", final="failed")
            return
        try:
            target = destination(url, self.config.allowed_networks, self.resolver)
        except AddressRefused as exc:
            bound.warning("webhook.refused", reason=exc.reason)
            self._record(delivery_id, None, f"refused: {exc.reason}", final="refused")
            return
        attempt = self.sender.send(target, signed_headers(secrets, message_id, body), body)
        if attempt.ok:
            bound.info(
                "webhook.delivered", status_code=attempt.status_code, address=str(target.address)
            )
        else:
            bound.warning(
                "webhook.attempt_failed", status_code=attempt.status_code, error=attempt.error
            )
        self._record(delivery_id, attempt, attempt.error, final="succeeded" if attempt.ok else None)

    def _record(
        self,
        delivery_id: uuid.UUID,
        attempt: Attempt | None,
        error: str | None,
        *,
        final: str | None,
    ) -> None:
        now = utcnow()
        with session_scope(self.sessions) as session:
            delivery = WebhookRepository(session).delivery(delivery_id)
            if delivery is None:
                return
            entry: dict[str, Any] = {
                "at": now.isoformat(),
                "status_code": attempt.status_code if attempt else None,
                "error": error,
                "seconds": attempt.seconds if attempt else 0.0,
            }
            delivery.attempt_log = [*delivery.attempt_log, entry][-self.config.max_attempts :]
            delivery.last_status_code = entry["status_code"]
            delivery.last_error = error[:300] if error else None
            if final is None and delivery.attempts >= self.config.max_attempts:
                final = "failed"
            if final is not None:
                delivery.status = final
                delivery.finished_at = now
            else:
                delivery.next_attempt_at = now + self.config.backoff(delivery.attempts)


def batch_event_body(batch: BatchOut) -> str:
    """``batch.completed``: the batch's id, its counts per status and its archive."""
    finished = batch.finished_at or utcnow()
    data = {
        "id": str(batch.id),
        "total": batch.total,
        "counts": batch.counts,
        "archive": batch.links.archive,
        "finished_at": finished.isoformat(),
    }
    message = {"type": BATCH_COMPLETED, "timestamp": finished.isoformat(), "data": data}
    return json.dumps(message, separators=(",", ":"), sort_keys=True)


def _queue(
    repository: WebhookRepository,
    tenant_id: str,
    event_type: str,
    body: str,
    job_id: uuid.UUID | None,
    now: datetime,
) -> None:
    """One pending delivery of ``body`` per endpoint of the tenant subscribed to it."""
    for endpoint in repository.subscribed(tenant_id, event_type):
        repository.add(
            WebhookDelivery(
                tenant_id=tenant_id,
                endpoint_id=endpoint.id,
                url=endpoint.url,
                event_type=event_type,
                job_id=job_id,
                body=body,
                status="pending",
                attempts=0,
                next_attempt_at=now,
                attempt_log=[],
                created_at=now,
            )
        )


def _host(url: str) -> str:
    """The host a log line names (never the path or query: they may carry tokens)."""
    return urlsplit(url).hostname or ""

"""The worker side of webhooks: fan job events out into deliveries, then send the due
deliveries, each attempt recorded on its row (the tenant's delivery log).

Everything lives in the database, so deliveries survive restarts: a claimed delivery's next
attempt is pushed one lease ahead before it is sent, and a dispatcher that dies mid-send
leaves it to be sent again when that lease runs out (receivers dedupe on ``webhook-id``).
Several dispatchers (the cluster's workers) share the tables: PostgreSQL hands each its own
rows (``SKIP LOCKED``), SQLite serialises them.

No tenant waits for another's receivers: the dispatcher's loop (an asyncio loop on a thread
of its own) claims what is due and starts each attempt as a task, never waiting for a round
to finish; each tenant has ``sends_per_tenant`` attempts in flight at most (its slow
receivers hold its own slots), and each attempt ends at its deadline, wall clock. A
dispatcher bound to tenants (``tenants``: a tenant's own ``serve`` pod) fans out, claims and
signs only theirs.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
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
    AllowedNetwork,
    Resolver,
    destination,
    parse_networks,
)
from facegate.webhooks.repository import WebhookRepository
from facegate.webhooks.signing import signed_headers
from facegate.webhooks.tables import BATCH_COMPLETED, WebhookDelivery
from facegate.webhooks.transport import Attempt, new_client, send

log = structlog.get_logger("facegate.webhooks")

MAX_BACKOFF_SECONDS = 6 * 3600.0
T = TypeVar("T")


@dataclass(frozen=True)
class DeliveryConfig:
    allowed_networks: tuple[AllowedNetwork, ...] = ()
    # The deadline of one attempt, wall clock: resolve, connect, send, read the answer's head.
    timeout_seconds: float = 5.0
    max_attempts: int = 8
    # Attempt n (1-based) that failed waits base * 4**(n-1): 5 s, 20 s, 80 s, ... 6 h at most.
    retry_base_seconds: float = 5.0
    poll_seconds: float = 1.0
    lease_seconds: float = 60.0
    batch: int = 50
    senders: int = 64  # attempts in flight in this process, every tenant together
    sends_per_tenant: int = 4  # attempts in flight for one tenant

    @classmethod
    def from_settings(cls, settings: Settings) -> DeliveryConfig:
        return cls(
            allowed_networks=parse_networks(settings.webhook_allowed_networks),
            timeout_seconds=settings.webhook_timeout_seconds,
            max_attempts=settings.webhook_max_attempts,
            retry_base_seconds=settings.webhook_retry_base_seconds,
            poll_seconds=settings.webhook_poll_seconds,
            sends_per_tenant=settings.webhook_sends_per_tenant,
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
    """Fans out and sends. :meth:`start` runs the loop on its own thread; :meth:`run_once`
    is one round that waits for the attempts it started (tests drive it without threads).

    ``tenants``: only these tenants' events and deliveries (a tenant-bound process);
    None: every tenant's."""

    def __init__(
        self,
        engine: Engine,
        config: DeliveryConfig | None = None,
        *,
        resolver: Resolver | None = None,
        tenants: frozenset[str] | None = None,
    ) -> None:
        self.config = config or DeliveryConfig()
        self.sessions: sessionmaker[Session] = sessionmaker(
            bind=engine.execution_options(sqlite_begin="IMMEDIATE"), expire_on_commit=False
        )
        self.resolver = resolver
        self.tenants = tenants
        self._in_flight: dict[str, int] = {}  # tenant -> attempts in flight (loop thread only)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._serve()), name="webhook-dispatcher", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop claiming; the attempts in flight end (each by its deadline at the latest)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _threads(self) -> ThreadPoolExecutor:
        # The database and the system resolver run here: enough threads that attempts
        # waiting on a slow lookup leave others theirs (asyncio's default has cores + 4).
        return ThreadPoolExecutor(self.config.senders + 8, thread_name_prefix="webhook-io")

    async def _serve(self) -> None:
        asyncio.get_running_loop().set_default_executor(self._threads())
        tasks: set[asyncio.Task[None]] = set()
        async with new_client(self.config.timeout_seconds) as client:
            while not self._stop.is_set():
                try:
                    busy = len(await self._start_round(client, tasks))
                except Exception:
                    log.exception("webhook.dispatcher_error")
                    busy = 0
                # Woken early when an attempt ends: its tenant may have more due.
                await _wait_any(tasks, 0.05 if busy else self.config.poll_seconds, self._stop)
            if tasks:
                await asyncio.wait(tasks)

    # one round
    def run_once(self) -> int:
        """Fan out waiting events, send the due deliveries and wait for those attempts;
        how many rows it handled."""

        async def round_trip() -> int:
            asyncio.get_running_loop().set_default_executor(self._threads())
            tasks: set[asyncio.Task[None]] = set()
            async with new_client(self.config.timeout_seconds) as client:
                started = await self._start_round(client, tasks)
                if tasks:
                    await asyncio.wait(tasks)
            return started.events + len(started)

        # On a thread of its own: callers (tests) may be inside an event loop already.
        with ThreadPoolExecutor(1, thread_name_prefix="webhook-round") as runner:
            return runner.submit(asyncio.run, round_trip()).result()

    async def _start_round(
        self, client: httpx.AsyncClient, tasks: set[asyncio.Task[None]]
    ) -> _Round:
        events = await _in_thread(self.fan_out)
        in_flight = dict(self._in_flight)  # a snapshot: the tasks change it on this loop
        claimed = await _in_thread(lambda: self.claim_due(in_flight))
        for tenant_id, delivery_id in claimed:
            self._in_flight[tenant_id] = self._in_flight.get(tenant_id, 0) + 1
            task = asyncio.create_task(self._attempt(client, tenant_id, delivery_id))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return _Round(claimed, events)

    def fan_out(self) -> int:
        """Each job event becomes a delivery per subscribed endpoint; the event of a
        batch's last item also queues ``batch.completed`` (once: the batch is marked)."""
        now = utcnow()
        with session_scope(self.sessions) as session:
            repository = WebhookRepository(session)
            events = repository.take_events(self.config.batch, self.tenants)
            jobs, batches = JobRepository(session), BatchRepository(session)
            for event in events:
                job = jobs.get(event.tenant_id, event.job_id)
                if job is None:  # deleted with its tenant since
                    continue
                body = job_event_body(event.event_type, job)
                queue_deliveries(repository, event.tenant_id, event.event_type, body, job.id, now)
                batch_id = batches.batch_of(event.tenant_id, job.id)
                if batch_id is None:
                    continue
                batch = batches.get(event.tenant_id, batch_id)
                items = batches.items(event.tenant_id, batch_id)
                if batch is None or not all(item_job.is_terminal for _, item_job in items):
                    continue
                if batches.mark_completed(event.tenant_id, batch_id, now):
                    body = batch_event_body(BatchOut.of(batch, items))
                    queue_deliveries(repository, event.tenant_id, BATCH_COMPLETED, body, None, now)
            repository.drop_events([event.id for event in events])
        return len(events)

    def claim_due(self, in_flight: Mapping[str, int]) -> list[tuple[str, uuid.UUID]]:
        """Claim due deliveries, each tenant up to its free slots (its in-flight attempts
        count against ``sends_per_tenant``), the tenant waiting longest first; (tenant,
        delivery id) of each. A claimed delivery's next attempt moves one lease ahead."""
        now = utcnow()
        free_total = self.config.senders - sum(in_flight.values())
        claimed: list[tuple[str, uuid.UUID]] = []
        if free_total <= 0:
            return claimed
        lease = timedelta(seconds=self.config.lease_seconds)
        with session_scope(self.sessions) as session:
            repository = WebhookRepository(session)
            for tenant_id in repository.due_tenants(now, self.tenants):
                free = min(
                    self.config.sends_per_tenant - in_flight.get(tenant_id, 0),
                    free_total - len(claimed),
                    self.config.batch,
                )
                if free <= 0:
                    continue
                for delivery in repository.take_due(tenant_id, now, free):
                    delivery.attempts += 1
                    delivery.next_attempt_at = now + lease
                    claimed.append((tenant_id, delivery.id))
                if len(claimed) >= free_total:
                    break
        return claimed

    # one delivery
    async def _attempt(
        self, client: httpx.AsyncClient, tenant_id: str, delivery_id: uuid.UUID
    ) -> None:
        try:
            await self._send_one(client, delivery_id)
        except Exception:
            log.exception("webhook.attempt_error", tenant_id=tenant_id)
        finally:
            left = self._in_flight.get(tenant_id, 1) - 1
            if left:
                self._in_flight[tenant_id] = left
            else:
                self._in_flight.pop(tenant_id, None)

    async def _send_one(self, client: httpx.AsyncClient, delivery_id: uuid.UUID) -> None:
        loaded = await _in_thread(lambda: self._load(delivery_id))
        if loaded is None:
            return
        tenant_id, url, body, message_id, event_type, secrets = loaded
        bound = log.bind(
            tenant_id=tenant_id,
            delivery_id=str(delivery_id),
            event_type=event_type,
            host=_host(url),
        )
        if not secrets:
            await _in_thread(
                lambda: self._record(delivery_id, None, "the endpoint was deleted", final="failed")
            )
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.timeout_seconds
        try:
            # The lookup is part of the attempt: its deadline covers it too.
            async with asyncio.timeout_at(deadline):
                target = await _in_thread(
                    lambda: destination(url, self.config.allowed_networks, self.resolver)
                )
        except AddressRefused as exc:
            bound.warning("webhook.refused", reason=exc.reason)
            error = f"refused: {exc.public}"
            await _in_thread(lambda: self._record(delivery_id, None, error, final="refused"))
            return
        except TimeoutError:
            target = None
        if target is None:
            attempt = Attempt(None, "timed out resolving the host", self.config.timeout_seconds)
        else:
            headers = signed_headers(secrets, message_id, body)
            attempt = await send(client, target, headers, body, max(0.0, deadline - loop.time()))
        if attempt.ok:
            address = str(target.address) if target else None
            bound.info("webhook.delivered", status_code=attempt.status_code, address=address)
        else:
            bound.warning(
                "webhook.attempt_failed", status_code=attempt.status_code, error=attempt.error
            )
        final = "succeeded" if attempt.ok else None
        await _in_thread(lambda: self._record(delivery_id, attempt, attempt.error, final=final))

    def _load(self, delivery_id: uuid.UUID) -> tuple[str, str, bytes, str, str, list[str]] | None:
        """What an attempt needs of its delivery: (tenant, url, body, message id, event
        type, the signing secrets; none when the endpoint was deleted)."""
        with session_scope(self.sessions, read_only=True) as session:
            repository = WebhookRepository(session)
            delivery = repository.delivery(delivery_id)
            if delivery is None:
                return None
            endpoint = (
                repository.endpoint_by_id(delivery.endpoint_id) if delivery.endpoint_id else None
            )
            secrets = endpoint.signing_secrets(utcnow()) if endpoint is not None else []
            return (
                delivery.tenant_id,
                delivery.url,
                delivery.body.encode(),
                delivery.message_id,
                delivery.event_type,
                secrets,
            )

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


def queue_deliveries(
    repository: WebhookRepository,
    tenant_id: str,
    event_type: str,
    body: str,
    job_id: uuid.UUID | None,
    now: datetime,
) -> None:
    """One pending delivery of ``body`` per endpoint of the tenant subscribed to it (in the
    caller's transaction: the dispatcher sends it once that commits)."""
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


@dataclass(frozen=True)
class _Round:
    """What one round started: the deliveries claimed, and the events fanned out."""

    claimed: list[tuple[str, uuid.UUID]]
    events: int

    def __len__(self) -> int:
        return len(self.claimed)


async def _in_thread(call: Callable[[], T]) -> T:
    """A blocking call (the database, the system resolver) off the event loop."""
    return await asyncio.to_thread(call)


async def _wait_any(tasks: set[asyncio.Task[None]], seconds: float, stop: threading.Event) -> None:
    """Until an attempt ends, ``seconds`` pass or ``stop`` is set (checked every 50 ms)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    while not stop.is_set() and loop.time() < until:
        pending = [task for task in tasks if not task.done()]
        step = min(0.05, max(0.0, until - loop.time()))
        if not pending:
            await asyncio.sleep(step)
            continue
        done, _ = await asyncio.wait(pending, timeout=step, return_when=asyncio.FIRST_COMPLETED)
        if done:
            return


def _host(url: str) -> str:
    """The host a log line names (never the path or query: they may carry tokens)."""
    return urlsplit(url).hostname or ""

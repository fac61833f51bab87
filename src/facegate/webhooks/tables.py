"""The webhook tables (migration ``0013_webhooks``).

``webhook_events`` is the outbox a database trigger on ``jobs`` fills when a job of a
tenant with an enabled endpoint reaches a terminal status, in the transaction that
finished it (a live stream's end queues its deliveries itself, in the transaction that
ends it); the dispatcher turns each event into one ``webhook_deliveries`` row per
subscribed endpoint and deletes it. A delivery row is both the retry queue and the log the
tenant reads.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime, utcnow

EventType = Literal[
    "job.succeeded", "job.failed", "job.cancelled", "batch.completed", "stream.ended"
]
BATCH_COMPLETED = "batch.completed"
# A live stream that ended (facegate.streams): queued in the transaction that ends it.
STREAM_ENDED = "stream.ended"
# A job removed by a takedown case: sent to every enabled endpoint (a notice, not a
# subscription), never fanned out from the jobs trigger.
JOB_REMOVED = "job.removed"
EVENT_TYPES: tuple[str, ...] = (
    "job.succeeded",
    "job.failed",
    "job.cancelled",
    BATCH_COMPLETED,
    STREAM_ENDED,
)
# pending: waiting for its next attempt; succeeded: a 2xx answer; failed: out of attempts;
# refused: the URL's address is not allowed (SSRF rules), never sent.
DeliveryStatus = Literal["pending", "succeeded", "failed", "refused"]
DELIVERY_STATUSES: tuple[str, ...] = ("pending", "succeeded", "failed", "refused")


class WebhookEndpoint(Base):
    """A URL of one tenant that receives the event types it subscribes to."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True
    )
    url: Mapped[str] = mapped_column(String(2048), nullable=False)
    description: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    event_types: Mapped[list[str]] = mapped_column(JSON, nullable=False)
    # ``whsec_`` + base64 key. After a rotation the previous one still signs (a second
    # signature in the same header) until ``previous_secret_expires_at``.
    secret: Mapped[str] = mapped_column(String(100), nullable=False)
    previous_secret: Mapped[str | None] = mapped_column(String(100), default=None)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    created_by: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)

    def signing_secrets(self, now: datetime) -> list[str]:
        """The secrets that sign a message sent at ``now``: the current one, and the
        previous one during its grace period."""
        secrets = [self.secret]
        expires = self.previous_secret_expires_at
        if self.previous_secret and expires is not None and expires > now:
            secrets.append(self.previous_secret)
        return secrets


class WebhookEvent(Base):
    """A job that ended, waiting to be fanned out (written by the trigger on ``jobs``)."""

    __tablename__ = "webhook_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(63), nullable=False)
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, nullable=False)
    event_type: Mapped[str] = mapped_column(String(32), nullable=False)


class WebhookDelivery(Base):
    """One message to one URL: its exact body (signed anew at each attempt), where it
    stands and what each attempt got."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_tenant_created", "tenant_id", "created_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False
    )
    endpoint_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("webhook_endpoints.id", ondelete="SET NULL"), default=None
    )
    url: Mapped[str] = mapped_column(String(2048), nullable=False)
    event_type: Mapped[str] = mapped_column(String(32), nullable=False)
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, default=None)
    body: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="pending")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    # Also the claim's lease: a claimed delivery's next attempt is pushed past the send,
    # so a dispatcher that dies mid-send leaves it to be retried, not lost.
    next_attempt_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False)
    last_status_code: Mapped[int | None] = mapped_column(Integer, default=None)
    last_error: Mapped[str | None] = mapped_column(String(300), default=None)
    attempt_log: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False, default=list)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)

    @property
    def message_id(self) -> str:
        """The ``webhook-id`` header: the same on every attempt (receivers dedupe on it)."""
        return f"msg_{self.id.hex}"

"""All SQL on webhook tables. Tenant-facing reads and writes start from
``readable_endpoints(tenant)`` / ``readable_deliveries(tenant)``; the dispatcher's
statements (events to fan out, the tenants with deliveries due) work across tenants, or
across those a tenant-bound process serves, and answer no request."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Select, delete, func, select
from sqlalchemy.orm import Session

from facegate.webhooks.tables import WebhookDelivery, WebhookEndpoint, WebhookEvent


class WebhookRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    @staticmethod
    def readable_endpoints(tenant_id: str) -> Select[WebhookEndpoint]:
        return select(WebhookEndpoint).where(WebhookEndpoint.tenant_id == tenant_id)

    @staticmethod
    def readable_deliveries(tenant_id: str) -> Select[WebhookDelivery]:
        return select(WebhookDelivery).where(WebhookDelivery.tenant_id == tenant_id)

    def add(self, row: WebhookEndpoint | WebhookDelivery) -> None:
        self.session.add(row)
        self.session.flush()

    def endpoint(self, tenant_id: str, endpoint_id: uuid.UUID) -> WebhookEndpoint | None:
        stmt = self.readable_endpoints(tenant_id).where(WebhookEndpoint.id == endpoint_id)
        return self.session.scalars(stmt).one_or_none()

    def endpoints(self, tenant_id: str) -> list[WebhookEndpoint]:
        stmt = self.readable_endpoints(tenant_id).order_by(WebhookEndpoint.created_at)
        return list(self.session.scalars(stmt))

    def subscribed(self, tenant_id: str, event_type: str) -> list[WebhookEndpoint]:
        return [e for e in self.endpoints(tenant_id) if e.enabled and event_type in e.event_types]

    def delete_endpoint(self, endpoint: WebhookEndpoint) -> None:
        self.session.delete(endpoint)
        self.session.flush()

    def deliveries(
        self,
        tenant_id: str,
        *,
        endpoint_id: uuid.UUID | None = None,
        statuses: Sequence[str] = (),
        limit: int = 50,
    ) -> list[WebhookDelivery]:
        stmt = self.readable_deliveries(tenant_id)
        if endpoint_id is not None:
            stmt = stmt.where(WebhookDelivery.endpoint_id == endpoint_id)
        if statuses:
            stmt = stmt.where(WebhookDelivery.status.in_(list(statuses)))
        stmt = stmt.order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id).limit(limit)
        return list(self.session.scalars(stmt))

    # the dispatcher's statements (every tenant, or the tenants its process is bound to)
    def take_events(self, limit: int, tenants: frozenset[str] | None = None) -> list[WebhookEvent]:
        """Events to fan out (only ``tenants``' when given), locked against another
        dispatcher (PostgreSQL)."""
        stmt = select(WebhookEvent)
        if tenants is not None:
            stmt = stmt.where(WebhookEvent.tenant_id.in_(sorted(tenants)))
        stmt = stmt.order_by(WebhookEvent.id).limit(limit).with_for_update(skip_locked=True)
        return list(self.session.scalars(stmt))

    def drop_events(self, ids: Sequence[int]) -> None:
        if ids:
            self.session.execute(delete(WebhookEvent).where(WebhookEvent.id.in_(list(ids))))

    def due_tenants(
        self, now: datetime, tenants: frozenset[str] | None = None, limit: int = 1000
    ) -> list[str]:
        """The tenants with a delivery due (only among ``tenants`` when given), the one
        waiting longest first."""
        oldest = func.min(WebhookDelivery.next_attempt_at)
        stmt = select(WebhookDelivery.tenant_id).where(
            WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= now
        )
        if tenants is not None:
            stmt = stmt.where(WebhookDelivery.tenant_id.in_(sorted(tenants)))
        stmt = stmt.group_by(WebhookDelivery.tenant_id).order_by(oldest).limit(limit)
        return list(self.session.scalars(stmt))

    def take_due(self, tenant_id: str, now: datetime, limit: int) -> list[WebhookDelivery]:
        """A tenant's pending deliveries whose next attempt is due, locked against another
        dispatcher (PostgreSQL; SQLite's write transaction serialises them)."""
        stmt = (
            self.readable_deliveries(tenant_id)
            .where(WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= now)
            .order_by(WebhookDelivery.next_attempt_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        return list(self.session.scalars(stmt))

    def delivery(self, delivery_id: uuid.UUID) -> WebhookDelivery | None:
        return self.session.get(WebhookDelivery, delivery_id)

    def endpoint_by_id(self, endpoint_id: uuid.UUID) -> WebhookEndpoint | None:
        return self.session.get(WebhookEndpoint, endpoint_id)

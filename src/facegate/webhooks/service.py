"""Webhook endpoint rules: create (the URL's form and a literal address checked at once, a
name at each delivery), delete, rotate the secret with a grace period; each audited (the
URL without its query)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Final

import structlog
from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.errors import InvalidInput, NotFound
from facegate.observability.audit import record_audit
from facegate.principal import Principal
from facegate.webhooks.addresses import AllowedNetwork, literal_refusal, recorded_url
from facegate.webhooks.repository import WebhookRepository
from facegate.webhooks.schemas import EndpointCreate
from facegate.webhooks.signing import new_secret
from facegate.webhooks.tables import WebhookEndpoint

log = structlog.get_logger("facegate.webhooks")

WEBHOOK_CREATE: Final = "webhook.create"
WEBHOOK_DELETE: Final = "webhook.delete"
WEBHOOK_ROTATE: Final = "webhook.rotate_secret"
MAX_ENDPOINTS = 20


class WebhookService:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.repository = WebhookRepository(session)

    def create(
        self, principal: Principal, request: EndpointCreate, allowed: Sequence[AllowedNetwork]
    ) -> WebhookEndpoint:
        tenant_id = principal.tenant_id
        refused = literal_refusal(request.url, allowed)
        if refused is not None:
            log.warning("webhook.refused", tenant_id=tenant_id, reason=refused, stage="create")
            raise InvalidInput(
                f"this webhook URL is refused: {refused}", code="webhook-url-refused"
            )
        if len(self.repository.endpoints(tenant_id)) >= MAX_ENDPOINTS:
            raise InvalidInput(
                f"a tenant has at most {MAX_ENDPOINTS} webhook endpoints",
                code="too-many-webhooks",
                limit="max_webhook_endpoints",
            )
        endpoint = WebhookEndpoint(
            id=uuid.uuid4(),
            tenant_id=tenant_id,
            url=request.url,
            description=request.description,
            event_types=sorted(set(request.event_types)),
            secret=new_secret(),
            enabled=True,
            created_by=principal.actor[:200],
            created_at=utcnow(),
        )
        self.repository.add(endpoint)
        record_audit(
            self.session,
            principal,
            WEBHOOK_CREATE,
            f"webhook:{endpoint.id}",
            # Without query, fragment or credentials: receivers put their tokens there, and
            # the audit trail is read by the tenant's admins and the operators.
            {"url": recorded_url(request.url), "event_types": endpoint.event_types},
        )
        return endpoint

    def get(self, tenant_id: str, endpoint_id: uuid.UUID) -> WebhookEndpoint:
        endpoint = self.repository.endpoint(tenant_id, endpoint_id)
        if endpoint is None:
            raise NotFound("no such webhook endpoint")
        return endpoint

    def delete(self, principal: Principal, endpoint_id: uuid.UUID) -> None:
        endpoint = self.get(principal.tenant_id, endpoint_id)
        record_audit(
            self.session,
            principal,
            WEBHOOK_DELETE,
            f"webhook:{endpoint.id}",
            {"url": recorded_url(endpoint.url)},
        )
        self.repository.delete_endpoint(endpoint)

    def rotate(
        self, principal: Principal, endpoint_id: uuid.UUID, grace_seconds: int
    ) -> WebhookEndpoint:
        """A new secret; the old one keeps signing beside it for ``grace_seconds``."""
        endpoint = self.get(principal.tenant_id, endpoint_id)
        now = utcnow()
        endpoint.previous_secret = endpoint.secret if grace_seconds else None
        endpoint.previous_secret_expires_at = (
            now + timedelta(seconds=grace_seconds) if grace_seconds else None
        )
        endpoint.secret = new_secret()
        self.session.flush()
        record_audit(
            self.session,
            principal,
            WEBHOOK_ROTATE,
            f"webhook:{endpoint.id}",
            {"grace_seconds": grace_seconds},
        )
        return endpoint

"""HTTP routes of webhooks: a tenant's endpoints (create, list, read, delete, rotate the
secret) and its delivery log. Managed by the tenant's ``tenant:admin``."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.orm import Session

from facegate.api.deps import SessionDep, get_state, run_in_session, scoped
from facegate.api.errors import PROBLEM_RESPONSES
from facegate.principal import TENANT_ADMIN, Principal
from facegate.webhooks.addresses import parse_networks
from facegate.webhooks.repository import WebhookRepository
from facegate.webhooks.schemas import (
    DeliveryOut,
    EndpointCreate,
    EndpointCreated,
    EndpointOut,
    RotateSecret,
    SecretRotated,
)
from facegate.webhooks.service import WebhookService

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], responses=PROBLEM_RESPONSES)

ManagePrincipal = Annotated[Principal, scoped(TENANT_ADMIN)]
DeliveryStatusName = Literal["pending", "succeeded", "failed", "refused"]


@router.post("", status_code=201)
def create_endpoint(
    body: EndpointCreate, request: Request, session: SessionDep, principal: ManagePrincipal
) -> EndpointCreated:
    """Register a URL for the tenant's job events. The answer holds the signing secret,
    shown this once. A URL whose host is a non-public address is refused (422
    ``webhook-url-refused``); a host name is resolved and checked at each delivery."""
    allowed = parse_networks(get_state(request).settings.webhook_allowed_networks)
    endpoint = WebhookService(session).create(principal, body, allowed)
    return EndpointCreated.model_validate(
        {**EndpointOut.model_validate(endpoint).model_dump(), "secret": endpoint.secret}
    )


@router.get("")
def list_endpoints(session: SessionDep, principal: ManagePrincipal) -> list[EndpointOut]:
    return [
        EndpointOut.model_validate(e)
        for e in WebhookRepository(session).endpoints(principal.tenant_id)
    ]


@router.get("/deliveries")
async def list_deliveries(
    request: Request,
    principal: ManagePrincipal,
    endpoint_id: uuid.UUID | None = None,
    status: Annotated[list[DeliveryStatusName] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[DeliveryOut]:
    """The delivery log, newest first: each message's status, attempts and what each
    attempt got (status code or error, refusals with their reason)."""

    def read(session: Session) -> list[DeliveryOut]:
        rows = WebhookRepository(session).deliveries(
            principal.tenant_id, endpoint_id=endpoint_id, statuses=status or (), limit=limit
        )
        return [DeliveryOut.model_validate(row) for row in rows]

    return await run_in_session(request, read, read_only=True)


@router.get("/{endpoint_id}")
def get_endpoint(
    endpoint_id: uuid.UUID, session: SessionDep, principal: ManagePrincipal
) -> EndpointOut:
    return EndpointOut.model_validate(WebhookService(session).get(principal.tenant_id, endpoint_id))


@router.delete("/{endpoint_id}", status_code=204, response_class=Response)
def delete_endpoint(
    endpoint_id: uuid.UUID, session: SessionDep, principal: ManagePrincipal
) -> Response:
    """Stop sending to it; its delivery log stays."""
    WebhookService(session).delete(principal, endpoint_id)
    return Response(status_code=204)


@router.post("/{endpoint_id}/rotate-secret")
def rotate_secret(
    endpoint_id: uuid.UUID, body: RotateSecret, session: SessionDep, principal: ManagePrincipal
) -> SecretRotated:
    """A new signing secret; during ``grace_seconds`` each message carries signatures by
    both, so receivers can switch without losing one."""
    endpoint = WebhookService(session).rotate(principal, endpoint_id, body.grace_seconds)
    return SecretRotated(
        id=endpoint.id,
        secret=endpoint.secret,
        previous_secret_expires_at=endpoint.previous_secret_expires_at,
    )

"""Admin routes of the ban list: see who is banned, lift a ban."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel

from facegate.api.deps import AdminDep, SessionDep
from facegate.api.errors import PROBLEM_RESPONSES
from facegate.errors import BadRequest, NotFound
from facegate.observability.audit import IP_UNBAN, record_audit
from facegate.ratelimit.bans import Ban
from facegate.ratelimit.clientip import client_key
from facegate.ratelimit.gateway import Gateway

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=PROBLEM_RESPONSES)


class BanOut(BaseModel):
    """One active ban."""

    ip: str
    strikes: int
    expires_at: datetime
    retry_after: int


def _gateway(request: Request) -> Gateway:
    gateway: Gateway | None = getattr(request.app.state, "gateway", None)
    if gateway is None:
        raise NotFound("rate limiting is disabled on this server")
    return gateway


def _out(ban: Ban, now: float) -> BanOut:
    return BanOut(
        ip=ban.ip,
        strikes=ban.strikes,
        expires_at=datetime.fromtimestamp(ban.expires_at, UTC),
        retry_after=ban.retry_after(now),
    )


@router.get("/bans")
def list_bans(request: Request, _admin: AdminDep) -> list[BanOut]:
    """IPs banned for repeated failed authentications, and until when."""
    gateway = _gateway(request)
    now = gateway.clock()
    return [_out(ban, now) for ban in gateway.operator_call(gateway.bans.list_bans)]


@router.delete("/bans/{ip}", status_code=204)
def unban(
    ip: str,
    request: Request,
    session: SessionDep,
    admin: AdminDep,
    forget: Annotated[
        bool, Query(description="Also forget past bans (the next one starts short again)")
    ] = False,
) -> Response:
    """Lift the ban of ``ip``; 404 when it is not banned. An IPv6 client is banned by its
    network (``FACEGATE_CLIENT_IPV6_PREFIX``): any address in it lifts it."""
    gateway = _gateway(request)
    try:
        address = client_key(str(ipaddress.ip_address(ip)), gateway.ipv6_prefix)
    except ValueError:
        raise BadRequest(f"{ip!r} is not an IP address") from None
    if not gateway.operator_call(lambda: gateway.bans.unban(address, forget=forget)):
        raise NotFound(f"{address} is not banned")
    record_audit(session, admin, IP_UNBAN, f"ip:{address}", {"forget": forget})
    return Response(status_code=204)

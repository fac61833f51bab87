"""ICE servers of live streams: what a client is given (``GET /v1/streams/ice``) and what
the server's own side gathers from.

A TURN server is used with time-limited credentials (the TURN REST scheme of coturn's
``use-auth-secret`` / ``static-auth-secret``): the username is ``<expiry>:<subject>``
(expiry in Unix seconds; the subject is the tenant for a client, ``stream-<id>`` for the
server's side of one stream) and the password is base64(HMAC-SHA1(secret, username)).
The TURN server recomputes it from the same shared secret and refuses it once the expiry
has passed, so a credential names who it was issued to and cannot be moved to another
tenant, and the secret itself never leaves the service.

A credential lasts ``FACEGATE_STREAM_TURN_START_SECONDS`` (to start a stream with it) plus
the tenant's ``max_stream_seconds`` (the TURN client re-authenticates every refresh of its
allocation while the stream runs).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from datetime import UTC, datetime

from aiortc import RTCConfiguration, RTCIceServer, RTCIceTransportPolicy
from pydantic import BaseModel, Field

from facegate.settings import Settings


def turn_credential(secret: str, subject: str, expires: int) -> tuple[str, str]:
    """(username, password) of the TURN REST scheme for ``subject`` until ``expires``."""
    username = f"{expires}:{subject}"
    digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
    return username, base64.b64encode(digest).decode()


class IceServer(BaseModel):
    """One entry of a WebRTC ``RTCConfiguration.iceServers``."""

    urls: list[str]
    username: str | None = None
    credential: str | None = Field(
        default=None, description="the TURN password for this username (never the secret)"
    )


class IceServers(BaseModel):
    ice_servers: list[IceServer] = Field(
        description="pass as RTCPeerConnection({iceServers}) before making the offer; "
        "empty: the server's host candidates are all there is"
    )
    expires_at: datetime | None = Field(
        default=None,
        description="when the TURN credentials stop working (a stream started with them "
        "runs to its max_stream_seconds); none without TURN",
    )
    relay_only: bool = Field(
        description="the server offers relay candidates only: a client must reach the TURN "
        "server (with the credentials above)"
    )


def _servers(
    urls: list[str], secret: str | None, subject: str, expires: int
) -> list[tuple[list[str], str | None, str | None]]:
    """(urls, username, credential) per server: the stun: ones together without
    credentials, the turn:/turns: ones together with the subject's credential."""
    stun = [url for url in urls if url.startswith("stun:")]
    turn = [url for url in urls if not url.startswith("stun:")]
    servers: list[tuple[list[str], str | None, str | None]] = []
    if stun:
        servers.append((stun, None, None))
    if turn:
        assert secret is not None  # the settings refuse turn: URLs without a secret
        username, password = turn_credential(secret, subject, expires)
        servers.append((turn, username, password))
    return servers


def _secret(settings: Settings) -> str | None:
    secret = settings.stream_turn_secret
    return None if secret is None else secret.get_secret_value()


def client_ice_servers(
    settings: Settings, tenant_id: str, max_stream_seconds: float, now: float | None = None
) -> IceServers:
    """The ICE servers a client of ``tenant_id`` uses (``FACEGATE_STREAM_ICE_URLS``), with a
    TURN credential of that tenant."""
    now = time.time() if now is None else now
    expires = int(now + settings.stream_turn_start_seconds + max_stream_seconds)
    servers = _servers(settings.stream_ice_urls, _secret(settings), tenant_id, expires)
    has_turn = any(username is not None for _, username, _ in servers)
    return IceServers(
        ice_servers=[IceServer(urls=u, username=n, credential=c) for u, n, c in servers],
        expires_at=datetime.fromtimestamp(expires, UTC) if has_turn else None,
        relay_only=settings.stream_ice_relay_only,
    )


def server_configuration(
    settings: Settings, stream_id: uuid.UUID, max_stream_seconds: float, now: float | None = None
) -> RTCConfiguration:
    """The server side of one stream: ``FACEGATE_STREAM_SERVER_ICE_URLS`` (default: the
    clients' URLs), a TURN credential of the stream, relay candidates only when
    ``FACEGATE_STREAM_ICE_RELAY_ONLY``."""
    now = time.time() if now is None else now
    urls = settings.server_ice_urls
    expires = int(now + settings.stream_turn_start_seconds + max_stream_seconds)
    servers = _servers(urls, _secret(settings), f"stream-{stream_id}", expires)
    relay = settings.stream_ice_relay_only
    return RTCConfiguration(
        iceServers=[RTCIceServer(urls=u, username=n, credential=c) for u, n, c in servers],
        iceTransportPolicy=RTCIceTransportPolicy.RELAY if relay else RTCIceTransportPolicy.ALL,
    )

"""Placing a stream on an API process with room for it (the cluster shape).

Each API process that has a peer address (``stream_peer_url``: where the other API
processes reach it, ``http://POD_IP:8000`` in a cluster) writes its room for more streams
to ``stream_nodes`` at start-up, every checkpoint and whenever a stream starts or ends
there. A start
this process must refuse for lack of room (503 ``streams_per_process`` or
``stream_cores``) is handed, as the client sent it, to the peer with the most room that
beat lately, and the peer's answer is the client's: the SDP answer then names that peer's
candidates (or the TURN relay), so the media flows between the client and the peer.

The peer checks the request as any other: the caller's own ``Authorization`` travels with
it and nothing is added to it, so placement grants nothing a direct request would not.
One hop only: a handed request carries ``Facegate-Placed`` and is never handed on. The
peer sees the client's address through ``X-Forwarded-For`` (the api pods' network must be
in ``trusted_proxies``, as the shipped manifests have it). Without a peer address (the
embedded shape's one process) nothing is written and a refusal stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import httpx
import structlog
from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from facegate.database import SessionFactory, session_scope, utcnow
from facegate.errors import Unavailable
from facegate.observability import metrics
from facegate.settings import Settings
from facegate.stream_registry import StreamRegistry
from facegate.streams.service import this_node
from facegate.streams.tables import StreamNode

log = structlog.get_logger("facegate.streams")

PLACED_HEADER = "Facegate-Placed"
#: the refusals that say this process has no room (a peer may have some)
ROOM_LIMITS = frozenset({"streams_per_process", "stream_cores"})
#: the request's headers that travel with it (the caller's credentials among them)
CARRIED = ("authorization", "content-type", "user-agent", "x-request-id")
#: the peer's headers the client gets back with its answer
RETURNED = ("content-type", "location", "retry-after", "x-request-id")
#: a peer whose last word is older than this many checkpoints is not asked
FRESH_CHECKPOINTS = 2
PEERS_ASKED = 3
HAND_SECONDS = 60.0


def write_room(session: Session, url: str, room: int) -> None:
    """This process's room, as of now (one row per process: its address)."""
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    now = utcnow()
    statement = insert(StreamNode).values(url=url, node=this_node(), room=room, heartbeat_at=now)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=["url"], set_={"node": this_node(), "room": room, "heartbeat_at": now}
        )
    )


def forget(session: Session, url: str) -> None:
    """This process stops: its peers hand it nothing more."""
    session.execute(delete(StreamNode).where(StreamNode.url == url))


def peers_with_room(session: Session, url: str, fresh_seconds: float) -> list[str]:
    """The other processes' addresses that said lately they had room, the most first."""
    since = utcnow() - timedelta(seconds=fresh_seconds)
    return list(
        session.scalars(
            select(StreamNode.url)
            .where(StreamNode.url != url, StreamNode.room > 0, StreamNode.heartbeat_at >= since)
            .order_by(StreamNode.room.desc(), StreamNode.heartbeat_at.desc())
            .limit(PEERS_ASKED)
        )
    )


def beat(settings: Settings, sessions: SessionFactory, registry: StreamRegistry) -> None:
    """Write this process's room (nothing without ``stream_peer_url``): periodically, and
    whenever a stream starts or ends here."""
    url = settings.stream_peer_url
    if url is not None:
        with session_scope(sessions) as session:
            write_room(session, url, registry.room())


def leave(settings: Settings, sessions: SessionFactory) -> None:
    url = settings.stream_peer_url
    if url is not None:
        with session_scope(sessions) as session:
            forget(session, url)


@dataclass(frozen=True)
class Handed:
    """A start as the client sent it: its headers (lower-case names), its body and the
    address it came from."""

    headers: Mapping[str, str]
    body: bytes
    client: str | None


@dataclass(frozen=True)
class PeerAnswer:
    """What the peer that took a start answered, for the client as it is."""

    status: int
    content: bytes
    headers: dict[str, str]


def _forwarded_for(start: Handed) -> str:
    """``X-Forwarded-For`` as a proxy sends it on: the chain so far and the address this
    request came from."""
    chain = [start.headers.get("x-forwarded-for", "").strip(), start.client or ""]
    return ", ".join(part for part in chain if part)


def may_hand(settings: Settings, start: Handed, refused: Unavailable) -> bool:
    """Whether a refused start may go to a peer: this process has a peer address, it was
    refused for lack of room here, and it was not handed here by a peer already."""
    return (
        settings.stream_peer_url is not None
        and refused.extra.get("limit") in ROOM_LIMITS
        and PLACED_HEADER.lower() not in start.headers
    )


async def hand_to_peer(
    settings: Settings, sessions: SessionFactory, start: Handed
) -> PeerAnswer | None:
    """The answer of a peer that took a start this process has no room for (``may_hand``);
    None when no peer has room or none took it (then the refusal stands)."""
    own = settings.stream_peer_url
    assert own is not None
    fresh = FRESH_CHECKPOINTS * settings.stream_checkpoint_seconds
    with_room = await asyncio.to_thread(_peers, sessions, own, fresh)
    if not with_room:
        return None
    headers = {name: start.headers[name] for name in CARRIED if name in start.headers}
    headers[PLACED_HEADER] = "1"
    headers["X-Forwarded-For"] = _forwarded_for(start)
    async with httpx.AsyncClient(timeout=HAND_SECONDS, follow_redirects=False) as client:
        for url in with_room:
            try:
                answer = await client.post(f"{url}/v1/streams", content=start.body, headers=headers)
            except httpx.HTTPError as error:
                log.warning("stream.placement_failed", peer=url, error=type(error).__name__)
                metrics.stream_placement("unreachable")
                continue
            if answer.status_code == 503:  # it filled up since it last said so
                metrics.stream_placement("full")
                continue
            metrics.stream_placement("handed")
            log.info("stream.placed", peer=url, status=answer.status_code)
            returned = {k: answer.headers[k] for k in RETURNED if k in answer.headers}
            return PeerAnswer(answer.status_code, answer.content, returned)
    return None


def _peers(sessions: SessionFactory, url: str, fresh_seconds: float) -> list[str]:
    with session_scope(sessions, read_only=True) as session:
        return peers_with_room(session, url, fresh_seconds)

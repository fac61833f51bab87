"""Live streams in the cluster shape: two ``facegate api`` processes on PostgreSQL, each
with its peer address, as the api pods run them. One has no room for a stream
(``FACEGATE_STREAMS_PER_PROCESS=0``): a start sent to it is placed on the other, whose
media the client then talks to, and a ``DELETE`` sent to the first ends it there."""

from __future__ import annotations

import asyncio
import uuid

import httpx
from clusterkit import Cluster, free_port, session_scope_of, wait_for
from sqlalchemy import Engine, select
from tests.streams.streamkit import CAMERA_PHOTO, photo, source_body

from facegate.observability.audit.tables import AuditEvent
from facegate.streams.loopback import camera_frame, run_client_at
from facegate.streams.tables import LiveStreamRow, StreamNode
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService
from facegate.usage.tables import UsageRecord


def live_tenant(engine: Engine) -> str:
    """A tenant with live on (two streams) and a director's key; the key's token."""
    policy = PolicySpec(max_concurrent_streams=2, requests_per_minute=1_000_000)
    with session_scope_of(engine) as session:
        service = TenancyService(session)
        service.create_tenant(TenantSpec(id="live", policy=policy))
        return service.create_key("live", KeyCreate(scopes=["director"])).token


def room(engine: Engine, url: str) -> int | None:
    with session_scope_of(engine) as session:
        node = session.get(StreamNode, url)
        return None if node is None else node.room


def test_a_start_sent_to_a_full_api_process_runs_on_its_peer(
    cluster: Cluster, cluster_engine: Engine
) -> None:
    token = live_tenant(cluster_engine)
    full_port, peer_port = free_port(), free_port()
    full_url, peer_url = f"http://127.0.0.1:{full_port}", f"http://127.0.0.1:{peer_port}"
    beat = {"FACEGATE_STREAM_CHECKPOINT_SECONDS": "1", "FACEGATE_STREAM_CHECK_SECONDS": "0.5"}
    full = cluster.start_api(
        "api-full",
        full_port,
        beat | {"FACEGATE_STREAMS_PER_PROCESS": "0", "FACEGATE_STREAM_PEER_URL": full_url},
    )
    peer = cluster.start_api(
        "api-peer",
        peer_port,
        beat | {"FACEGATE_STREAMS_PER_PROCESS": "1", "FACEGATE_STREAM_PEER_URL": peer_url},
    )
    wait_for(lambda: room(cluster_engine, peer_url) == 1, 30, "the peer to say it has room")
    assert room(cluster_engine, full_url) == 0

    picture = camera_frame(photo(CAMERA_PHOTO))
    run = asyncio.run(run_client_at(full, token, source_body(), picture, 4.0, fps=15.0))

    # The frames came back (stamped camera frames, swapped), and the DELETE sent to the
    # full process ended the stream on its peer.
    assert len(run.samples) >= 20, (len(run.samples), run.unreadable)
    assert run.server["state"] == "ended"
    assert run.server["end_reason"] == "deleted"
    with session_scope_of(cluster_engine) as session:
        row = session.get(LiveStreamRow, uuid.UUID(run.stream_id))
        assert row is not None
        usage = session.scalars(select(UsageRecord).where(UsageRecord.job_id == row.id)).one()
        actions = session.scalars(
            select(AuditEvent.action).where(AuditEvent.target == f"stream:{row.id}")
        ).all()
        node, seconds, frames = row.node, row.seconds, usage.frames
    peer_pid = cluster.processes[1].pid
    assert node.endswith(f":{peer_pid}")  # it ran on the peer
    assert seconds >= 4.0
    assert frames >= len(run.samples)
    assert sorted(actions) == ["stream.end", "stream.start"]

    # Both processes show it, from either side.
    headers = {"Authorization": f"Bearer {token}"}
    for base in (full, peer):
        shown = httpx.get(f"{base}/v1/streams", headers=headers, timeout=10).json()["items"]
        assert [(s["id"], s["end_reason"]) for s in shown] == [(run.stream_id, "deleted")]
    # The placements are counted on the process that handed the start on.
    metrics = httpx.get(f"{full}/metrics", timeout=10).text
    assert 'facegate_stream_placements_total{outcome="handed"} 1.0' in metrics

"""A tenant's streams seen from an API process that does not run them (another replica
behind the same load balancer, on the same database): listed, read, and ended by
``DELETE``, which reaches the process running the stream through the stream's row; 404 for
another tenant, as everywhere. And a start that a process has no room for, placed on a
peer that has (facegate.streams.placement)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_settings
from tests.dbkit import drop_schema, fresh_database, postgres_url
from tests.liveserver import free_port, serving
from tests.streams.streamkit import LIVE_POLICY, open_elsewhere, open_stream, stored, wait_for

from facegate.database import session_scope
from facegate.errors import InvalidSettings
from facegate.provenance.keys import create_keys
from facegate.settings import get_settings
from facegate.streams.placement import PLACED_HEADER
from facegate.streams.runtime import streams_service
from facegate.streams.tables import LiveStreamRow, StreamNode

CHECK = 0.5  # stream_check_seconds: a stop asked elsewhere is read within this


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    engine, url, schema = fresh_database(request.param, tmp_path, name="replicas", what="stream")
    engine.dispose()
    if schema is not None:  # the cluster shape: the operator provides the signing identity
        create_keys(tmp_path / "provenance")
    yield url
    base = postgres_url()
    if schema is not None and base is not None:
        drop_schema(base, schema)


async def test_another_process_lists_reads_and_ends_a_stream(
    make_client: Any, database_url: str
) -> None:
    async with (
        make_client(
            database_url=database_url,
            stream_check_seconds=CHECK,
            stream_checkpoint_seconds=CHECK,
        ) as h,
        make_client(
            database_url=database_url, stream_check_seconds=CHECK, stream_engines_warm=0
        ) as elsewhere,
    ):
        h.create_tenant("live", **LIVE_POLICY)
        h.create_tenant("other", **LIVE_POLICY)
        director = h.headers("live", ["director"])
        viewer = h.headers("live", ["viewer"])
        other = h.headers("other", ["director"])
        live, response = await open_stream(h.client, director)
        assert response.status_code == 201, response.text
        stream_id = response.json()["id"]
        url = f"/v1/streams/{stream_id}"
        try:
            await wait_for(lambda: len(live.received) >= 3, 60)

            # The other process lists and reads it, live; another tenant sees nothing.
            listed = (await elsewhere.client.get("/v1/streams", headers=viewer)).json()
            assert [(s["id"], s["state"]) for s in listed["items"]] == [(stream_id, "live")]

            # ... with its figures as of its last heartbeat
            async def beaten() -> dict[str, Any]:
                return dict((await elsewhere.client.get(url, headers=viewer)).json())

            shown = await beaten()
            assert shown["state"] == "live"
            started = time.monotonic()
            while shown["frames_out"] < 3 or shown["fps"] <= 0:
                assert time.monotonic() - started < 10, shown
                await asyncio.sleep(0.2)
                shown = await beaten()
            assert (shown["width"], shown["height"]) == (640, 480)
            assert shown["latency_ms"] > 0
            assert {"analyse", "render"} <= set(shown["stages_ms"])
            assert (await elsewhere.client.get("/v1/streams", headers=other)).json() == {
                "items": []
            }
            assert (await elsewhere.client.delete(url, headers=other)).status_code == 404
            assert (await elsewhere.client.delete(url, headers=viewer)).status_code == 403
            await asyncio.sleep(3 * CHECK)
            assert h.state.streams.get("live", uuid.UUID(stream_id)).state == "live"

            # A DELETE there ends it here, and is answered once it has ended.
            started = time.monotonic()
            ended = await elsewhere.client.delete(url, headers=director)
            took = time.monotonic() - started
        finally:
            await live.close()
        assert ended.status_code == 200, ended.text
        assert ended.json()["state"] == "ended"
        assert ended.json()["end_reason"] == "deleted"
        assert took <= 2 * CHECK + 1.0 + 0.5
        assert any(
            m == {"event": "ended", "reason": "deleted", "detail": None} for m in live.messages
        )
        record = h.state.streams.get("live", uuid.UUID(stream_id))
        assert (record.state, record.end_reason) == ("ended", "deleted")
        _, usage, ends = stored(h, uuid.UUID(stream_id))
        assert usage.duration_seconds == pytest.approx(record.seconds, abs=0.01)
        assert [e.details["reason"] for e in ends] == ["deleted"]

        # Both processes list it as ended, with its last figures; a second DELETE answers
        # it as it is.
        shown = await beaten()
        assert (shown["frames_out"], shown["fps"]) == (record.stats.frames_out, 0.0)
        for process in (h, elsewhere):
            items = (await process.client.get("/v1/streams", headers=viewer)).json()["items"]
            assert [(s["id"], s["state"], s["end_reason"]) for s in items] == [
                (stream_id, "ended", "deleted")
            ]
        again = await elsewhere.client.delete(url, headers=director)
        assert (again.status_code, again.json()["end_reason"]) == (200, "deleted")


async def test_a_stream_whose_process_does_not_answer_is_202_and_still_live(
    make_client: Any,
) -> None:
    # A stream another replica runs that has not ended by the time the DELETE gives up
    # waiting (that process stalled, or died: the sweep ends it as server-lost later).
    async with make_client(stream_check_seconds=CHECK) as h:
        h.create_tenant("live", **LIVE_POLICY)
        director = h.headers("live", ["director"])
        elsewhere = open_elsewhere(h, "live", "replica-b:7", seconds=3.0)
        started = time.monotonic()
        response = await h.client.delete(f"/v1/streams/{elsewhere}", headers=director)
        assert response.status_code == 202, response.text
        assert time.monotonic() - started >= 2 * CHECK + 1.0
        assert (response.json()["state"], response.json()["seconds"]) == ("live", 3.0)
        with session_scope(h.state.session_factory) as session:
            row = session.get(LiveStreamRow, elsewhere)
            assert row is not None
            assert row.stop_requested_at is not None
            assert row.ended_at is None
        listed = (await h.client.get("/v1/streams", headers=director)).json()["items"]
        assert [(s["id"], s["state"]) for s in listed] == [(str(elsewhere), "live")]


async def test_a_start_without_room_here_is_placed_on_a_peer_with_room(
    make_client: Any, app_factory: Any
) -> None:
    # Two API processes on one database: "here" has no room for a stream (a cap of 0), the
    # peer has room for one. A start sent here is answered by the peer, whose media the
    # client then talks to; here lists it and ends it by DELETE.
    port = free_port()
    peer_url = f"http://127.0.0.1:{port}"
    peer = app_factory(
        services=[streams_service],
        stream_peer_url=peer_url,
        streams_per_process=1,
        stream_check_seconds=CHECK,
    )
    async with make_client(
        stream_peer_url=f"http://127.0.0.1:{free_port()}",
        streams_per_process=0,
        stream_check_seconds=CHECK,
    ) as here:
        here.create_tenant("live", **{**LIVE_POLICY, "max_concurrent_streams": 2})
        director = here.headers("live", ["director"])
        # No peer has said it has room yet: the refusal stands.
        first, alone = await open_stream(here.client, director)
        await first.close()
        assert alone.status_code == 503, alone.text
        assert alone.json()["limit"] == "streams_per_process"
        with serving(peer, port):
            await wait_for(lambda: room_of(here, peer_url) == 1, 30)
            live, response = await open_stream(here.client, director)
            try:
                assert response.status_code == 201, response.text
                stream_id = uuid.UUID(response.json()["id"])
                assert response.headers["location"] == f"/v1/streams/{stream_id}"
                await wait_for(lambda: len(live.received) >= 3, 60)
                peer_state = peer.state.facegate
                assert [r.id for r in peer_state.streams.live()] == [stream_id]
                assert here.state.streams.live() == []
                assert room_of(here, peer_url) == 0  # said at once

                # The peer is full now: another start here is refused, as is a start that
                # was handed on once already (one hop).
                second, full = await open_stream(here.client, director)
                await second.close()
                assert (full.status_code, full.json()["limit"]) == (503, "streams_per_process")
                placed = {**director, PLACED_HEADER: "1"}
                third, again = await open_stream(here.client, placed)
                await third.close()
                assert again.status_code == 503

                # Here lists the stream and ends it.
                listed = (await here.client.get("/v1/streams", headers=director)).json()
                assert [(s["id"], s["state"]) for s in listed["items"]] == [
                    (str(stream_id), "live")
                ]
                ended = await here.client.delete(f"/v1/streams/{stream_id}", headers=director)
            finally:
                await live.close()
            assert ended.status_code == 200, ended.text
            assert ended.json()["end_reason"] == "deleted"
            record = peer_state.streams.get("live", stream_id)
            assert record.end_reason == "deleted"
            assert record.stats.frames_out >= 3
            # the peer says at once that it has room again (its beat is every 5 s)
            await wait_for(lambda: room_of(here, peer_url) == 1, 2)
        assert room_of(here, peer_url) is None  # the peer left when it stopped


def room_of(h: Any, url: str) -> int | None:
    with session_scope(h.state.session_factory) as session:
        node = session.get(StreamNode, url)
        return None if node is None else node.room


def test_a_peer_url_is_an_address_the_peers_can_reach(tmp_path: Path) -> None:
    assert make_settings(tmp_path).stream_peer_url is None  # the embedded shape: no placement
    for good in ("http://10.1.2.3:8000", "http://[fd00::1]:8000", "https://api-0.api:8443"):
        assert make_settings(tmp_path, stream_peer_url=good).stream_peer_url == good
    # an IPv6 pod address expanded without brackets, a path, no host: refused, named
    for bad in ("http://fd00::1:8000", "http://10.1.2.3:8000/v1", "http://:8000", "ftp://h"):
        with pytest.raises(InvalidSettings, match="FACEGATE_STREAM_PEER_URL"):
            get_settings(stream_peer_url=bad)

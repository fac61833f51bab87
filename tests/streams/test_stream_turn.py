"""Live streams through a TURN server: the ICE servers a client is given
(``GET /v1/streams/ice``) carry time-limited TURN REST credentials bound to its tenant and
never the secret; a real coturn (Debian's ``turnserver``, started on loopback) accepts
them, refuses them once expired or moved to another tenant; and a stream whose client and
server may only use relay candidates comes back swapped through it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import make_settings
from tests.streams.streamkit import (
    CAMERA_PHOTO,
    LIVE_POLICY,
    SOURCE_PHOTO,
    open_stream,
    photo,
    wait_for,
)
from tests.streams.test_streams_api import descriptor
from tests.streams.turnkit import allocate, local_turn, require_turnserver

from facegate.engine.identity import (
    SAME_PERSON_DISTANCE,
    FaceRecogniser,
    available,
    identity_distance,
)
from facegate.errors import InvalidSettings
from facegate.settings import get_settings
from facegate.streams.ice import client_ice_servers, server_configuration, turn_credential
from facegate.streams.loopback import client_configuration

SECRET = "turn-secret-" + "x" * 20  # what coturn's static-auth-secret would hold
TURN_URL = "turn:turn.example.net:3478?transport=udp"


def test_a_credential_is_the_turn_rest_scheme_and_lasts_a_stream(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        stream_ice_urls=["stun:stun.example.net:3478", TURN_URL],
        stream_turn_secret=SECRET,
        stream_turn_start_seconds=120,
    )
    now = 1_800_000_000.5
    ice = client_ice_servers(settings, "tenant-a", 900, now=now)
    stun, relay = ice.ice_servers
    assert (stun.urls, stun.username, stun.credential) == (
        ["stun:stun.example.net:3478"],
        None,
        None,
    )
    expires = 1_800_000_000 + 120 + 900
    assert relay.urls == [TURN_URL]
    assert relay.username == f"{expires}:tenant-a"
    digest = hmac.new(SECRET.encode(), relay.username.encode(), hashlib.sha1).digest()
    assert relay.credential == base64.b64encode(digest).decode()
    assert ice.expires_at is not None
    assert int(ice.expires_at.timestamp()) == expires
    assert SECRET not in ice.model_dump_json()
    # Another tenant: another username, so another password.
    other = client_ice_servers(settings, "tenant-b", 900, now=now).ice_servers[1]
    assert other.username == f"{expires}:tenant-b"
    assert other.credential != relay.credential
    # The server's side of a stream: its own credential, named after the stream.
    stream_id = uuid.UUID(int=7)
    config = server_configuration(settings, stream_id, 900, now=now)
    (_, server_turn) = config.iceServers or []
    assert (server_turn.username, server_turn.credential) == turn_credential(
        SECRET, f"stream-{stream_id}", expires
    )


def test_settings_refuse_turn_without_a_secret_and_name_no_secret(tmp_path: Path) -> None:
    assert make_settings(tmp_path).stream_ice_urls == []
    assert client_ice_servers(make_settings(tmp_path), "t", 900).ice_servers == []
    with pytest.raises(ValueError, match="stun:, turn: or turns:"):
        make_settings(tmp_path, stream_ice_urls=["http://turn.example.net"])
    with pytest.raises(ValueError, match="FACEGATE_STREAM_TURN_SECRET"):
        make_settings(tmp_path, stream_ice_urls=[TURN_URL])
    with pytest.raises(ValueError, match="relay"):
        make_settings(
            tmp_path, stream_ice_urls=["stun:stun.example.net:3478"], stream_ice_relay_only=True
        )
    with pytest.raises(InvalidSettings) as refused:
        get_settings(stream_turn_secret="short-secret")
    assert "short-secret" not in str(refused.value)
    assert "at least 16" in str(refused.value)
    # The server's side may use another URL (the TURN Service's in-cluster name).
    settings = make_settings(
        tmp_path,
        stream_ice_urls=[TURN_URL],
        stream_server_ice_urls=["turn:facegate-turn:3478?transport=udp"],
        stream_turn_secret=SECRET,
        stream_ice_relay_only=True,
    )
    config = server_configuration(settings, uuid.uuid4(), 60)
    assert [s.urls for s in config.iceServers or []] == [["turn:facegate-turn:3478?transport=udp"]]
    assert config.iceTransportPolicy.value == "relay"
    assert SECRET in settings.secret_values()  # the log redactor knows it


async def test_ice_servers_are_for_live_tenants_and_carry_no_secret(make_client: Any) -> None:
    async with make_client(stream_ice_urls=[TURN_URL], stream_turn_secret=SECRET) as h:
        h.create_tenant("live", **LIVE_POLICY, max_stream_seconds=600)
        h.create_tenant("nolive")
        before = time.time()
        got = await h.client.get("/v1/streams/ice", headers=h.headers("live", ["director"]))
        assert got.status_code == 200, got.text
        assert got.headers["cache-control"] == "no-store"
        assert SECRET not in got.text
        (server,) = got.json()["ice_servers"]
        expires, tenant = server["username"].split(":", 1)
        assert tenant == "live"
        # start window (300 s by default) + the tenant's max_stream_seconds
        assert before + 900 - 1 <= int(expires) <= time.time() + 900
        assert got.json()["relay_only"] is False
        viewer = await h.client.get("/v1/streams/ice", headers=h.headers("live", ["viewer"]))
        assert viewer.status_code == 403
        assert viewer.json()["scope"] == "streams:write"
        off = await h.client.get("/v1/streams/ice", headers=h.headers("nolive", ["director"]))
        assert off.status_code == 403
        assert off.json()["limit"] == "max_concurrent_streams"
        assert SECRET not in (await h.client.get("/openapi.json")).text


async def test_coturn_accepts_the_credentials_until_they_expire_and_for_their_tenant_only(
    tmp_path: Path,
) -> None:
    require_turnserver()
    settings = make_settings(tmp_path, stream_ice_urls=[TURN_URL], stream_turn_secret=SECRET)
    with local_turn(SECRET, tmp_path) as turn:
        (given,) = client_ice_servers(settings, "tenant-a", 900).ice_servers
        assert given.username is not None
        assert given.credential is not None
        assert await allocate(turn.port, given.username, given.credential) is not None
        # Expired: issued long enough ago that start window + max_stream_seconds have passed.
        (old,) = client_ice_servers(settings, "tenant-a", 900, now=time.time() - 1201).ice_servers
        assert old.username is not None
        assert old.credential is not None
        assert await allocate(turn.port, old.username, old.credential) is None
        # Bound to its tenant: the same password under another tenant's name is refused.
        expires = given.username.split(":", 1)[0]
        assert await allocate(turn.port, f"{expires}:tenant-b", given.credential) is None
        # ... and the expiry cannot be pushed back either.
        later = f"{int(expires) + 86400}:tenant-a"
        assert await allocate(turn.port, later, given.credential) is None
        # A credential made with another secret: refused.
        _, forged = turn_credential("another-secret-of-20-chars", "tenant-a", int(expires))
        assert await allocate(turn.port, given.username, forged) is None
        assert turn.allocations() == 1


@pytest.mark.skipif(not available(), reason="the dlib recogniser's models are not installed")
async def test_a_stream_relayed_through_coturn_comes_back_swapped(
    make_client: Any, tmp_path: Path
) -> None:
    """Client and server may use relay candidates only: every packet goes through coturn
    (both sides allocate there); the swapped frames come back with the source's identity."""
    require_turnserver()
    responses: list[httpx.Response] = []

    async def keep(response: httpx.Response) -> None:
        await response.aread()
        responses.append(response)

    with local_turn(SECRET, tmp_path) as turn:
        settings = {
            "stream_ice_urls": [turn.url],
            "stream_turn_secret": SECRET,
            "stream_ice_relay_only": True,
        }
        async with make_client(**settings) as h:
            h.client.event_hooks["response"].append(keep)
            h.create_tenant("live", **LIVE_POLICY)
            headers = h.headers("live", ["director"])
            ice = (await h.client.get("/v1/streams/ice", headers=headers)).json()
            assert ice["relay_only"] is True
            live, response = await open_stream(
                h.client, headers, configuration=client_configuration(ice, relay=True)
            )
            assert response.status_code == 201, response.text
            stream_id = response.json()["id"]
            try:
                offer = live.pc.localDescription.sdp
                answer = response.json()["sdp"]
                for sdp in (offer, answer):
                    candidates = [x for x in sdp.splitlines() if x.startswith("a=candidate:")]
                    assert candidates, sdp
                    assert all(" typ relay " in x for x in candidates), candidates
                await wait_for(lambda: len(live.received) >= 12, 60)
                assert live.pc.iceConnectionState == "completed"
                assert (await h.client.get(f"/v1/streams/{stream_id}", headers=headers)).json()[
                    "state"
                ] == "live"
            finally:
                ended = (await h.client.delete(f"/v1/streams/{stream_id}", headers=headers)).json()
                await live.close()
            assert ended["end_reason"] == "deleted"
            assert turn.allocations() >= 2  # the client's and the server's

            recogniser = FaceRecogniser()
            source = descriptor(h, recogniser, photo(SOURCE_PHOTO))
            camera = descriptor(h, recogniser, photo(CAMERA_PHOTO))
            distances = []
            for image, _, _ in live.received[-3:]:
                swapped = descriptor(h, recogniser, image)
                distances.append(
                    (identity_distance(swapped, source), identity_distance(swapped, camera))
                )
            assert all(d_source < d_camera for d_source, d_camera in distances), distances
            assert statistics.median(d for d, _ in distances) < SAME_PERSON_DISTANCE

    # The secret appears in no response of the whole run (bodies and headers).
    assert len(responses) >= 4
    for seen in responses:
        assert SECRET not in seen.text, seen.request.url
        assert all(SECRET not in value for value in seen.headers.values())

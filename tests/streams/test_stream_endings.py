"""Why a running stream ends, and that it ends in time: a revoked key or a suspended
tenant within 5 s, a silent client within 10 s (metering stops with it), the policy's
max_stream_seconds, a moderation refusal (the client is told why on its data channel);
and a camera larger than the policy's resolution is scaled down (frames alone:
test_live_frames)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import numpy as np
import pytest
from av import VideoFrame
from sqlalchemy import select
from tests.moderationkit import install_standin, with_marker
from tests.streams.streamkit import CAMERA_PHOTO, LIVE_POLICY, open_stream, photo, wait_for

from facegate.database import session_scope
from facegate.streams.loopback import PhotoCamera, camera_frame
from facegate.streams.runtime import streams_service
from facegate.tenancy import keys
from facegate.tenancy.service import TenancyService
from facegate.usage.tables import UsageRecord

FAST = {"stream_check_seconds": 0.5, "stream_silence_seconds": 3.0}


def ended_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in messages if m["event"] == "ended")


async def run_until_ended(
    h: Any, headers: dict[str, str], act: Any, frames: int = 3, **kwargs: Any
) -> Any:
    """Start a stream, let frames flow, ``act()``, then wait for the end: (the stream as
    shown, seconds from the act to the end, the client)."""
    live, response = await open_stream(h.client, headers, **kwargs)
    assert response.status_code == 201, response.text
    stream_id = response.json()["id"]
    record = h.state.streams.get("live", uuid.UUID(stream_id))
    await wait_for(lambda: len(live.received) >= frames or record.state == "ended", 60)
    acted = time.monotonic()
    act()
    await wait_for(lambda: record.state == "ended" and h.state.streams.live() == [], 30)
    took = time.monotonic() - acted
    await asyncio.sleep(0.3)  # the data channel's last message
    await live.close()
    return record, took, live


async def test_revoked_key_and_suspended_tenant_end_streams(make_client: Any) -> None:
    async with make_client(**FAST) as h:
        h.create_tenant("live", **LIVE_POLICY)
        token = h.create_key("live", ["director"])
        key_id = keys.parse_key(token).key_id  # type: ignore[union-attr]

        def revoke() -> None:
            with session_scope(h.state.session_factory) as session:
                TenancyService(session).revoke_key("live", key_id)

        headers = {"Authorization": f"Bearer {token}"}
        record, took, live = await run_until_ended(h, headers, revoke)
        assert record.end_reason == "credentials-revoked"
        assert took < 5
        assert ended_message(live.messages)["reason"] == "credentials-revoked"

        def suspend() -> None:
            with session_scope(h.state.session_factory) as session:
                TenancyService(session).set_status("live", "suspended")

        record, took, live = await run_until_ended(h, h.headers("live", ["director"]), suspend)
        assert record.end_reason == "tenant-suspended"
        assert took < 5


class SilentCamera(PhotoCamera):
    """Sends a few frames, then nothing (the connection stays up)."""

    silent = False

    async def recv(self) -> VideoFrame:
        while self.silent:
            await asyncio.sleep(3600)
        return await super().recv()


async def test_a_silent_client_is_closed_and_metering_stops(make_client: Any) -> None:
    async with make_client(**FAST, stream_checkpoint_seconds=0.5) as h:
        h.create_tenant("live", **LIVE_POLICY)
        headers = h.headers("live", ["director"])
        live, response = await open_stream(h.client, headers)
        assert response.status_code == 201
        await wait_for(lambda: len(live.received) >= 3, 60)
        record = h.state.streams.live()[0]
        # While it runs, its usage record is checkpointed (what a dying process leaves).
        await asyncio.sleep(1.2)
        with session_scope(h.state.session_factory) as session:
            usage = session.scalars(select(UsageRecord)).one()
            assert usage.job_id == record.id
            assert 0 < usage.duration_seconds <= record.seconds
        # The camera goes quiet: swap in a silent one on the client's sender.
        camera = SilentCamera(live.camera.picture)
        camera.silent = True
        live.pc.getSenders()[0].replaceTrack(camera)
        quiet = time.monotonic()
        await wait_for(lambda: record.state == "ended", 10)
        assert time.monotonic() - quiet < 10
        assert record.end_reason == "client-silent"
        seconds = record.seconds
        await asyncio.sleep(1.0)
        assert record.seconds == seconds  # the meter stopped at the end
        with session_scope(h.state.session_factory) as session:
            usage = session.scalars(select(UsageRecord)).one()
            assert usage.duration_seconds == pytest.approx(seconds, abs=0.01)
        await live.close()


async def test_max_stream_seconds_and_a_camera_over_the_resolution(make_client: Any) -> None:
    async with make_client(**FAST) as h:
        # 5 s: the first frame of a 1600x900 camera may take a while on a loaded machine
        h.create_tenant("live", **LIVE_POLICY, max_stream_seconds=5, max_output_resolution="720p")
        big = np.zeros((900, 1600, 3), np.uint8)
        face = photo(CAMERA_PHOTO)
        big[: min(900, face.shape[0]), : min(1600, face.shape[1])] = face[:900, :1600]
        live, response = await open_stream(
            h.client, h.headers("live", ["director"]), camera_photo=big, fps=5
        )
        assert response.status_code == 201
        record = h.state.streams.live()[0]
        await wait_for(lambda: record.state == "ended", 15)
        await asyncio.sleep(0.3)
        assert record.end_reason == "max_stream_seconds"
        assert 5 <= record.seconds < 7
        assert (record.width, record.height) == (1280, 720)
        assert ended_message(live.messages)["reason"] == "max_stream_seconds"
        await live.close()


@pytest.fixture
def standin(tmp_path: Any) -> None:
    install_standin(tmp_path / "models")


@pytest.mark.usefixtures("standin")
async def test_moderation_refusal_ends_the_stream_with_its_reason(make_client: Any) -> None:
    async with make_client(**FAST, stream_moderation_seconds=0.5) as h:
        h.create_tenant("live", **LIVE_POLICY)
        camera = camera_frame(with_marker(photo(CAMERA_PHOTO)))
        record, _, live = await run_until_ended(
            h, h.headers("live", ["director"]), lambda: None, frames=0, camera_photo=camera
        )
        assert record.end_reason == "content-policy-violation"
        message = ended_message(live.messages)
        assert message["reason"] == "content-policy-violation"
        assert "live frame" in message["detail"]


async def test_a_stopping_server_ends_its_streams_metered(make_client: Any) -> None:
    async with make_client(services=[streams_service]) as h:
        h.create_tenant("live", **LIVE_POLICY)
        live, response = await open_stream(h.client, h.headers("live", ["director"]))
        assert response.status_code == 201
        await wait_for(lambda: len(live.received) >= 3, 60)
        record = h.state.streams.live()[0]
        factory = h.state.session_factory
    # the app's lifespan ended: its streams with it, each metered and audited
    assert record.state == "ended"
    assert record.end_reason == "server-stopping"
    with session_scope(factory) as session:
        usage = session.scalars(select(UsageRecord)).one()
        assert usage.duration_seconds == pytest.approx(record.seconds, abs=0.01)
    await live.close()

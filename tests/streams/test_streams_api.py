"""Live streams end to end: an aiortc client streams a camera made of a face photo over
loopback to the app and checks what comes back (the source's identity, the watermark, the
frame numbers it stamped), what the API shows while it runs, and what usage, audit and
Prometheus recorded once it ended."""

from __future__ import annotations

import re
import statistics
from typing import Any

import cv2
import pytest
from sqlalchemy import select
from tests.streams.streamkit import (
    CAMERA_PHOTO,
    LIVE_POLICY,
    SOURCE_PHOTO,
    open_stream,
    photo,
    wait_for,
)

from facegate.database import session_scope
from facegate.engine.identity import (
    SAME_PERSON_DISTANCE,
    FaceRecogniser,
    available,
    identity_distance,
)
from facegate.engine.types import Frame
from facegate.observability.audit.tables import AuditEvent
from facegate.provenance.keys import load_keys
from facegate.provenance.payload import WATERMARK
from facegate.provenance.reading import read_image_watermark
from facegate.provenance.repository import MarkRepository
from facegate.streams.service import STREAM_END, STREAM_START
from facegate.usage.tables import UsageRecord


def descriptor(h: Any, recogniser: FaceRecogniser, frame: Frame) -> Any:
    faces = h.state.face_engine.analyser.analyse(frame)
    assert faces, "no face"
    face = max(faces, key=lambda f: (f.box[2] - f.box[0]) * (f.box[3] - f.box[1]))
    return recogniser.describe(frame, face)


def stream_seconds_metric(text: str, tenant: str) -> float:
    found = re.search(rf'^facegate_stream_seconds_total\{{tenant="{tenant}"\}} (\S+)$', text, re.M)
    return float(found[1]) if found else 0.0


@pytest.mark.skipif(not available(), reason="the dlib recogniser's models are not installed")
async def test_a_stream_swaps_marks_meters_and_audits(make_client: Any) -> None:
    async with make_client(streams_per_process=1) as h:
        h.create_tenant("live", **LIVE_POLICY)
        h.create_tenant("other", **LIVE_POLICY)
        headers = h.headers("live", ["editor"])
        metered = stream_seconds_metric((await h.client.get("/metrics")).text, "live")
        live, response = await open_stream(h.client, headers, audio=True)
        assert response.status_code == 201, response.text
        assert response.headers["location"] == f"/v1/streams/{response.json()['id']}"
        stream_id = response.json()["id"]
        try:
            await wait_for(lambda: len(live.received) >= 12, 60)

            # While it runs: the cap, another tenant, a viewer, the listing.
            second, refused = await open_stream(h.client, headers)
            await second.close()
            assert refused.status_code == 429, refused.text
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert refused.json()["limit"] == "max_concurrent_streams"
            other = h.headers("other", ["director"])
            third, full = await open_stream(h.client, other)  # this server runs its maximum
            await third.close()
            assert full.status_code == 503, full.text
            assert full.json()["limit"] == "streams_per_process"
            assert full.headers["retry-after"] == "10"
            assert (
                await h.client.get(f"/v1/streams/{stream_id}", headers=other)
            ).status_code == 404
            assert (
                await h.client.delete(f"/v1/streams/{stream_id}", headers=other)
            ).status_code == 404
            viewer = h.headers("live", ["viewer"])
            shown = (await h.client.get(f"/v1/streams/{stream_id}", headers=viewer)).json()
            assert shown["state"] == "live"
            assert shown["frames_out"] > 0
            assert shown["width"] == 640
            assert shown["latency_ms"] is not None
            # where the server's milliseconds go, per stage (p50 <= p95)
            stages = shown["stages_ms"]
            assert {"queue", "convert", "analyse", "render", "finish", "send"} <= set(stages)
            assert all(0 <= v["p50"] <= v["p95"] for v in stages.values())
            listed = (await h.client.get("/v1/streams", headers=viewer)).json()["items"]
            assert [item["id"] for item in listed] == [stream_id]
            # stats come on the data channel about once a second
            await wait_for(lambda: any(m["event"] == "stats" for m in live.messages), 10)
            assert live.audio_frames > 0  # the microphone came back (passed through)
        finally:
            ended = (await h.client.delete(f"/v1/streams/{stream_id}", headers=headers)).json()
            await live.close()
        assert ended["state"] == "ended"
        assert ended["end_reason"] == "deleted"

        # The frames came back in order, each a camera frame's number, none twice.
        numbers = [number for _, number, _ in live.received if number is not None]
        assert len(numbers) >= 0.8 * len(live.received)
        assert numbers == sorted(set(numbers))

        # The returned face is the source's person, not the camera's (the median of three
        # late frames: VP8 at the start of a stream, on a busy machine, is coarse).
        recogniser = FaceRecogniser()
        source = descriptor(h, recogniser, photo(SOURCE_PHOTO))
        camera = descriptor(h, recogniser, photo(CAMERA_PHOTO))
        pairs = []
        for image, _, _ in live.received[-3:]:
            swapped = descriptor(h, recogniser, image)
            pairs.append((identity_distance(swapped, source), identity_distance(swapped, camera)))
        assert all(d_source < d_camera for d_source, d_camera in pairs), pairs
        assert statistics.median(d for d, _ in pairs) < SAME_PERSON_DISTANCE, pairs

        # The watermark reads back from returned (VP8-compressed) frames: this stream's. One
        # frame read alone, as a screenshot is (benchmarks/live_bench.py counts how many do).
        key = load_keys(h.state.settings.provenance_path).mac_key(WATERMARK)
        payloads = [read_image_watermark(image, key).payload for image, _, _ in live.received[-15:]]
        serials = {p.serial for p in payloads if p is not None}
        assert len(serials) == 1, payloads
        # ... and `POST /v1/verify` on a screenshot of it traces the stream, for its tenant.
        marked = next(
            image for (image, _, _), p in zip(live.received[-15:], payloads, strict=True) if p
        )
        png = cv2.imencode(".png", marked)[1].tobytes()
        verified = await h.client.post(
            "/v1/verify", files={"file": ("shot.png", png)}, headers=headers
        )
        assert verified.status_code == 200, verified.text
        assert verified.json()["made_by_this_installation"] is True
        assert verified.json()["job"]["job_id"] == stream_id
        with session_scope(h.state.session_factory) as session:
            mark = MarkRepository(session).by_serial(serials.pop())
            assert mark is not None
            assert str(mark.job_id) == stream_id
            assert mark.tenant_id == "live"

            # Usage and audit match the stream's length.
            usage = session.scalars(
                select(UsageRecord).where(UsageRecord.tenant_id == "live")
            ).one()
            assert str(usage.job_id) == stream_id
            assert usage.kind == "stream"
            assert usage.duration_seconds == pytest.approx(ended["seconds"], abs=0.01)
            assert usage.frames == ended["frames_out"]
            events = session.scalars(
                select(AuditEvent)
                .where(AuditEvent.target == f"stream:{stream_id}")
                .order_by(AuditEvent.seq)
            ).all()
            assert [e.action for e in events] == [STREAM_START, STREAM_END]
            assert events[0].actor.startswith("key:")
            assert events[1].details["seconds"] == pytest.approx(ended["seconds"], abs=0.01)
            assert events[1].details["reason"] == "deleted"
        usage_read = h.headers("live", ["usage:read"])
        [totals] = (await h.client.get("/v1/usage?group_by=total", headers=usage_read)).json()[
            "totals"
        ]
        assert (totals["jobs"], totals["streams"]) == (0, 1)
        assert totals["stream_seconds"] == pytest.approx(ended["seconds"], abs=0.01)
        metrics = (await h.client.get("/metrics")).text
        assert stream_seconds_metric(metrics, "live") - metered == pytest.approx(
            ended["seconds"], abs=0.01
        )
        assert h.state.streams.live() == []

"""What a stream start refuses, with nothing left running: bad offers (400), a tenant
without live (403 naming max_concurrent_streams), a viewer (403), a processor outside
the policy (403), a bad source (422), a source without a face (422)."""

from __future__ import annotations

import base64
from typing import Any

import cv2
import numpy as np
from aiortc import RTCPeerConnection
from tests.streams.streamkit import LIVE_POLICY, offer_of, source_body
from tests.testdata import FACES


async def video_offer() -> str:
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="sendrecv")
    try:
        return await offer_of(pc)
    finally:
        await pc.close()


async def test_bad_requests_leave_nothing_running(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("live", **LIVE_POLICY)
        h.create_tenant("nolive")
        headers = h.headers("live", ["director"])
        offer = await video_offer()

        async def start(body: dict[str, Any], key: dict[str, str] = headers) -> Any:
            response = await h.client.post("/v1/streams", json=body, headers=key)
            if response.status_code >= 400:
                assert response.headers["content-type"].startswith("application/problem+json")
            return response

        for sdp in ("hello", "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"):
            refused = await start({"sdp": sdp, **source_body()})
            assert refused.status_code == 400, refused.text
            assert refused.json()["type"].endswith("invalid-sdp")

        audio = RTCPeerConnection()
        audio.addTransceiver("audio", direction="sendrecv")
        audio_only = await offer_of(audio)
        await audio.close()
        refused = await start({"sdp": audio_only, **source_body()})
        assert refused.status_code == 400
        assert "no video" in refused.json()["detail"]

        refused = await start({"sdp": offer, **source_body()}, h.headers("nolive", ["director"]))
        assert refused.status_code == 403
        assert refused.json()["limit"] == "max_concurrent_streams"

        refused = await start({"sdp": offer, **source_body()}, h.headers("live", ["viewer"]))
        assert refused.status_code == 403
        assert refused.json()["scope"] == "streams:write"

        body = {"sdp": offer, **source_body(), "options": {"processors": ["face_enhancer"]}}
        refused = await start(body)
        assert refused.status_code == 403
        assert refused.json()["limit"] == "allowed_processors"

        assert (await start({"sdp": offer})).status_code == 422  # no source
        bad = {"sdp": offer, "source_image": "not base64!"}
        assert (await start(bad)).status_code == 400
        gray = cv2.imencode(".jpg", np.full((240, 320, 3), 128, np.uint8))[1].tobytes()
        faceless = await start({"sdp": offer, "source_image": base64.b64encode(gray).decode()})
        assert faceless.status_code == 422, faceless.text
        assert faceless.json()["type"].endswith("no-face-detected")
        text = base64.b64encode((FACES / "SOURCES.md").read_bytes()).decode()
        assert (await start({"sdp": offer, "source_image": text})).status_code == 415

        assert h.state.streams.live() == []
        listed = await h.client.get("/v1/streams", headers=headers)
        assert listed.json()["items"] == []

"""Live streams end to end: an aiortc client streams a camera made of a face photo over
loopback to the app, and checks what comes back (the source's identity, the watermark,
the stamps), what the API shows, and what usage and audit recorded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.streams.streamkit import LIVE_POLICY, open_stream, wait_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def test_smoke(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("live", **LIVE_POLICY)
        headers = h.headers("live", ["director"])
        live, response = await open_stream(h.client, headers)
        assert response.status_code == 201, response.text
        stream_id = response.json()["id"]
        await wait_for(lambda: len(live.received) >= 10, 30)
        got = (await h.client.get(f"/v1/streams/{stream_id}", headers=headers)).json()
        print(got)
        print([s for _, s, _ in live.received][:20], live.messages[:3])
        ended = (await h.client.delete(f"/v1/streams/{stream_id}", headers=headers)).json()
        print(ended)
        await live.close()

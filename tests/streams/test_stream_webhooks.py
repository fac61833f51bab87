"""A stream's end reaches the tenant's webhooks: ``stream.ended``, signed as every webhook,
with the stream as ``GET /v1/streams/{id}`` shows it, whether it was ended by its client
(here a DELETE) or by the sweep after its process died; only to endpoints subscribed to
it, and never to another tenant's."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from tests.streams.streamkit import LIVE_POLICY, open_elsewhere, open_stream, wait_for
from tests.webhooks.receiver import receiving

from facegate.database import session_scope, utcnow
from facegate.streams.runtime import sweep
from facegate.streams.tables import LiveStreamRow
from facegate.webhooks.runtime import deliveries_service
from facegate.webhooks.signing import verify
from facegate.webhooks.tables import WebhookDelivery

ADMIN = ["director", "tenant:admin"]
LOOPBACK = ["127.0.0.1/32:*"]  # the receivers listen on free ports
BEAT = 0.5


async def test_a_stream_s_end_is_sent_to_the_tenant_s_subscribed_webhooks(
    make_client: Any,
) -> None:
    with receiving() as receiver, receiving() as jobs_only, receiving() as others:
        async with make_client(
            services=[deliveries_service],
            workers=1,  # the dispatcher runs where job workers do (none started here)
            webhook_allowed_networks=LOOPBACK,
            webhook_poll_seconds=0.05,
            stream_checkpoint_seconds=BEAT,
        ) as h:
            h.create_tenant("live", **LIVE_POLICY)
            h.create_tenant("other", **LIVE_POLICY)
            admin = h.headers("live", ADMIN)
            other = h.headers("other", ADMIN)
            hooks = [
                (admin, receiver.url, None),
                (admin, jobs_only.url, ["job.succeeded"]),
                (other, others.url, None),
            ]
            secrets = []
            for headers, url, types in hooks:
                body = {"url": url} | ({"event_types": types} if types else {})
                created = await h.client.post("/v1/webhooks", headers=headers, json=body)
                assert created.status_code == 201, created.text
                secrets.append(created.json()["secret"])
            assert "stream.ended" in created.json()["event_types"]  # subscribed by default

            live, response = await open_stream(h.client, admin)
            assert response.status_code == 201, response.text
            stream_id = response.json()["id"]
            try:
                await wait_for(lambda: len(live.received) >= 3, 60)
                ended = (await h.client.delete(f"/v1/streams/{stream_id}", headers=admin)).json()
            finally:
                await live.close()
            [message] = receiver.wait_for(1)
            verify(secrets[0], message.headers, message.body)
            event = json.loads(message.body)
            assert event["type"] == "stream.ended"
            data = event["data"]
            assert (data["id"], data["state"], data["end_reason"]) == (
                stream_id,
                "ended",
                "deleted",
            )
            assert data["seconds"] == ended["seconds"]
            assert data["frames_out"] == ended["frames_out"] >= 3
            assert (data["width"], data["height"]) == (640, 480)

            # A stream whose process died: the sweep that ends it sends it too.
            lost = open_elsewhere(h, "live", "replica-b:9", seconds=2.5)
            with session_scope(h.state.session_factory) as session:
                session.execute(
                    update(LiveStreamRow)
                    .where(LiveStreamRow.id == lost)
                    .values(heartbeat_at=utcnow() - timedelta(seconds=60))
                )
            assert [s.stream_id for s in sweep(h.state)] == [lost]
            second = receiver.wait_for(2)[1]
            event = json.loads(second.body)
            assert (event["type"], event["data"]["id"]) == ("stream.ended", str(lost))
            assert (event["data"]["end_reason"], event["data"]["seconds"]) == ("server-lost", 2.5)

            time.sleep(0.5)
            assert jobs_only.received == []  # not subscribed to it
            assert others.received == []  # another tenant's
            with session_scope(h.state.session_factory) as session:
                sent = session.scalars(
                    select(WebhookDelivery.job_id).where(
                        WebhookDelivery.event_type == "stream.ended"
                    )
                ).all()
            assert sorted(map(str, sent)) == sorted([stream_id, str(lost)])

"""Webhooks one tenant cannot use against another, on real sockets: a receiver that
trickles its answer a byte every 2 s holds an attempt no longer than the attempt's deadline
(wall clock); another tenant's delivery arrives within a second while the first tenant's
receivers are stuck; a tenant-bound ``serve`` sends none of the other tenants' webhooks;
the audit trail keeps a webhook's URL without its query."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, submit
from tests.webhooks.receiver import receiving, trickling

from facegate.webhooks.addresses import parse_networks
from facegate.webhooks.dispatcher import DeliveryConfig, WebhookDispatcher
from facegate.webhooks.runtime import deliveries_service
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(120)

ADMIN = ("jobs:write", "jobs:read", "tenant:admin")
LOOPBACK = ["127.0.0.1/32:*"]
DEADLINE = 3.0
SLACK = 1.0


async def end_a_job(h: Any, headers: dict[str, str]) -> float:
    """Submit a job and cancel it (queued: at once; claimed by a worker: when it stops):
    its end is an event; when it was cancelled."""
    job_id = (await submit(h.client, headers)).json()["id"]
    cancelled = await h.client.delete(f"/v1/jobs/{job_id}", headers=headers)
    assert cancelled.json()["status"] in ("cancelled", "running"), cancelled.text
    return time.monotonic()


async def test_a_trickling_receiver_holds_an_attempt_no_longer_than_its_deadline(
    make_client: Any,
) -> None:
    with trickling(interval=2.0, for_seconds=30.0) as slow:
        async with make_client(webhook_allowed_networks=LOOPBACK) as h:
            h.create_tenant("studio", **DEBUG_TENANT_POLICY)
            admin = h.headers("studio", ADMIN)
            created = await h.client.post("/v1/webhooks", headers=admin, json={"url": slow.url})
            assert created.status_code == 201, created.text
            await end_a_job(h, admin)
            config = DeliveryConfig(
                allowed_networks=parse_networks(LOOPBACK), timeout_seconds=DEADLINE
            )
            dispatcher = WebhookDispatcher(h.state.engine, config)
            started = time.monotonic()
            dispatcher.run_once()  # fans out, sends, waits for the attempt to end
            held = time.monotonic() - started
            [row] = (await h.client.get("/v1/webhooks/deliveries", headers=admin)).json()
    assert len(slow.opened) == 1
    assert held <= DEADLINE + SLACK, f"the attempt held {held:.1f} s"
    assert row["status"] == "pending"  # failed, to be retried
    assert "timed out" in row["last_error"]
    assert row["attempt_log"][0]["seconds"] <= DEADLINE + SLACK


async def test_one_tenants_stuck_receivers_do_not_delay_another_tenants_delivery(
    make_client: Any,
) -> None:
    """Tenant acme has 5 receivers that trickle; globex's fast receiver gets its message
    less than a second after its job ended, while acme's attempts are still held."""
    overrides = {"webhook_poll_seconds": 0.05, "webhook_timeout_seconds": 10.0}
    with trickling(interval=2.0, for_seconds=30.0) as slow, receiving() as fast:
        async with make_client(webhook_allowed_networks=LOOPBACK, **overrides) as h:
            h.create_tenant("acme", **DEBUG_TENANT_POLICY)
            h.create_tenant("globex", **DEBUG_TENANT_POLICY)
            acme, globex = h.headers("acme", ADMIN), h.headers("globex", ADMIN)
            for n in range(5):
                url = f"{slow.url}/{n}"
                created = await h.client.post("/v1/webhooks", headers=acme, json={"url": url})
                assert created.status_code == 201, created.text
            created = await h.client.post("/v1/webhooks", headers=globex, json={"url": fast.url})
            assert created.status_code == 201, created.text
            dispatcher = WebhookDispatcher(
                h.state.engine, DeliveryConfig.from_settings(h.state.settings)
            )
            dispatcher.start()
            try:
                await end_a_job(h, acme)
                deadline = time.monotonic() + 10
                while len(slow.opened) < 4 and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert len(slow.opened) >= 4  # acme's attempts are in flight, trickled
                ended = await end_a_job(h, globex)
                received = fast.wait_for(1, timeout=15)
                assert received, "globex's webhook did not come within 15 s"
                [message] = received
                arrived = fast.arrived[0]
                stuck = len(slow.opened) - len(slow.closed)
            finally:
                dispatcher.stop()
    assert json.loads(message.body)["type"] == "job.cancelled"
    assert arrived - ended < 1.0, f"globex's webhook came {arrived - ended:.2f} s after its event"
    assert stuck >= 4  # acme's receivers were still holding their attempts then


async def test_a_tenant_bound_serve_sends_no_other_tenants_webhooks(make_client: Any) -> None:
    """``serve`` with TENANT_ID (FACEGATE_WORKER_TENANTS): its dispatcher fans out, signs
    and sends its own tenant's webhooks only; another tenant's events stay for the shared
    workers (never read here, nor their secrets)."""
    services = [workers_service, deliveries_service]
    overrides = {
        "workers": 1,
        "worker_tenants": "studio",
        "job_poll_seconds": 0.05,
        "webhook_poll_seconds": 0.05,
    }
    with receiving() as own, receiving() as others:
        async with make_client(
            services=services, webhook_allowed_networks=LOOPBACK, **overrides
        ) as h:
            h.create_tenant("studio", **DEBUG_TENANT_POLICY)
            h.create_tenant("rival", **DEBUG_TENANT_POLICY)
            studio, rival = h.headers("studio", ADMIN), h.headers("rival", ADMIN)
            for headers, receiver in ((studio, own), (rival, others)):
                created = await h.client.post(
                    "/v1/webhooks", headers=headers, json={"url": receiver.url}
                )
                assert created.status_code == 201, created.text
            await end_a_job(h, rival)
            await end_a_job(h, studio)
            assert len(own.wait_for(1, timeout=15)) == 1
            time.sleep(1.5)  # the rival's event came first: time enough to have sent it
            rival_log = (await h.client.get("/v1/webhooks/deliveries", headers=rival)).json()
    assert others.received == []
    assert rival_log == []  # not even fanned out by this process


async def test_the_audit_trail_keeps_a_webhook_url_without_its_query(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        admin = h.headers("studio", ADMIN)
        url = "https://hooks.example.com/facegate?token=secret#frag-secret"
        created = await h.client.post("/v1/webhooks", headers=admin, json={"url": url})
        assert created.status_code == 201, created.text
        deleted = await h.client.delete(f"/v1/webhooks/{created.json()['id']}", headers=admin)
        assert deleted.status_code == 204
        audit = (await h.client.get("/v1/audit", headers=admin)).json()
    events = [e for e in audit["events"] if e["action"].startswith("webhook.")]
    assert {e["action"] for e in events} == {"webhook.create", "webhook.delete"}
    assert "secret" not in json.dumps(events)
    assert {e["details"]["url"] for e in events} == {"https://hooks.example.com/facegate"}

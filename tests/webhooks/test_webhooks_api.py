"""Webhooks end to end: a tenant registers a receiver the test starts on loopback
(allow-listed), its jobs' ends arrive signed (Standard Webhooks, checked here with an
independent HMAC and with facegate's verifier), failed attempts are retried with back-off and
survive a restart of the dispatcher, the old secret signs beside the new one during a
rotation's grace period, and the delivery log is the tenant's alone."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, submit, wait_terminal
from tests.webhooks.receiver import Received, receiving

from dbkit import drop_database, fresh_database
from facegate.database import create_engine_from_url, session_scope
from facegate.webhooks.addresses import parse_networks
from facegate.webhooks.dispatcher import DeliveryConfig, WebhookDispatcher
from facegate.webhooks.runtime import deliveries_service
from facegate.webhooks.signing import InvalidSignature, verify
from facegate.webhooks.tables import WebhookEvent
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(180)

ADMIN = ("jobs:write", "jobs:read", "tenant:admin")
LOOPBACK = ["127.0.0.1/32:*"]  # the receivers listen on free ports: every port opened
FAST = {"webhook_poll_seconds": 0.05, "webhook_retry_base_seconds": 0.05}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    engine, url, schema = fresh_database(request.param, tmp_path, name="hooks", what="webhook")
    engine.dispose()
    yield url
    drop_database(create_engine_from_url(url), schema)


def independent_signature(secret: str, received: Received) -> str:
    """The Standard Webhooks signature computed here, not with facegate's code."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = (
        received.headers["webhook-id"].encode()
        + b"."
        + received.headers["webhook-timestamp"].encode()
        + b"."
        + received.body
    )
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


async def create_endpoint(h: Any, headers: dict[str, str], url: str, **extra: Any) -> Any:
    return await h.client.post("/v1/webhooks", headers=headers, json={"url": url, **extra})


async def test_a_finished_job_reaches_the_receiver_signed(
    make_client: Any, database_url: str
) -> None:
    services = [workers_service, deliveries_service]
    overrides = {"workers": 1, "job_poll_seconds": 0.05, **FAST}
    with receiving() as receiver:
        async with make_client(
            services=services,
            database_url=database_url,
            webhook_allowed_networks=LOOPBACK,
            **overrides,
        ) as h:
            h.create_tenant("studio", **DEBUG_TENANT_POLICY)
            h.create_tenant("other", **DEBUG_TENANT_POLICY)
            admin = h.headers("studio", ADMIN)
            other = h.headers("other", ADMIN)
            created = await create_endpoint(h, admin, receiver.url, description="studio hook")
            assert created.status_code == 201, created.text
            endpoint = created.json()
            secret = endpoint["secret"]
            assert secret.startswith("whsec_")

            job_id = (await submit(h.client, admin)).json()["id"]
            assert (await wait_terminal(h.client, admin, job_id))["status"] == "succeeded"
            [message] = receiver.wait_for(1)

            assert message.path == "/hooks/facegate?token=t0"
            assert message.headers["host"] == f"127.0.0.1:{receiver.port}"
            assert message.headers["webhook-id"].startswith("msg_")
            assert abs(int(message.headers["webhook-timestamp"]) - time.time()) < 60
            assert message.headers["webhook-signature"] == independent_signature(secret, message)
            verify(secret, message.headers, message.body)
            with pytest.raises(InvalidSignature):
                verify(secret, message.headers, message.body.replace(b"succeeded", b"failed"))
            event = json.loads(message.body)
            assert event["type"] == "job.succeeded"
            assert event["data"]["id"] == job_id
            assert event["data"]["result"] == f"/v1/jobs/{job_id}/result"

            log = await _wait_log(h, admin, lambda rows: rows and rows[0]["status"] != "pending")
            [delivery] = log
            assert delivery["status"] == "succeeded"
            assert delivery["message_id"] == message.headers["webhook-id"]
            assert delivery["attempts"] == 1
            assert delivery["last_status_code"] == 200
            assert delivery["job_id"] == job_id

            # Another tenant sees none of it, and its jobs send nothing to this receiver.
            assert (await h.client.get("/v1/webhooks", headers=other)).json() == []
            assert (await h.client.get("/v1/webhooks/deliveries", headers=other)).json() == []
            missing = await h.client.get(f"/v1/webhooks/{endpoint['id']}", headers=other)
            assert missing.status_code == 404
            gone = await h.client.delete(f"/v1/webhooks/{endpoint['id']}", headers=other)
            assert gone.status_code == 404
            other_job = (await submit(h.client, other)).json()["id"]
            assert (await wait_terminal(h.client, other, other_job))["status"] == "succeeded"
            time.sleep(0.5)
            assert len(receiver.received) == 1

            # Managing webhooks needs tenant:admin.
            plain = h.headers("studio", ("jobs:write", "jobs:read"))
            refused = await create_endpoint(h, plain, receiver.url)
            assert refused.status_code == 403


async def _wait_log(h: Any, headers: dict[str, str], done: Any) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while True:
        rows: list[dict[str, Any]] = (
            await h.client.get("/v1/webhooks/deliveries", headers=headers)
        ).json()
        if done(rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dispatcher(engine: Engine, **config: Any) -> WebhookDispatcher:
    values: dict[str, Any] = {
        "allowed_networks": parse_networks(LOOPBACK),
        "retry_base_seconds": 0.05,
        **config,
    }
    return WebhookDispatcher(engine, DeliveryConfig(**values))


async def test_retries_back_off_and_survive_a_restart(make_client: Any, database_url: str) -> None:
    port = free_port()  # nothing listens there yet: the first attempts fail to connect
    url = f"http://127.0.0.1:{port}/hook"
    async with make_client(database_url=database_url, webhook_allowed_networks=LOOPBACK) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        admin = h.headers("studio", ADMIN)
        secret = (await create_endpoint(h, admin, url, event_types=["job.cancelled"])).json()[
            "secret"
        ]
        job_id = (await submit(h.client, admin)).json()["id"]  # no workers: stays queued
        cancelled = await h.client.delete(f"/v1/jobs/{job_id}", headers=admin)
        assert cancelled.json()["status"] == "cancelled"

        first = dispatcher(h.state.engine)
        assert first.run_once() == 2  # the event fanned out, then one attempt
        first.stop()  # the process "restarts" with the delivery pending
        [row] = (await h.client.get("/v1/webhooks/deliveries", headers=admin)).json()
        assert row["status"] == "pending"
        assert row["attempts"] == 1
        assert row["last_status_code"] is None
        assert "ConnectError" in row["last_error"]

        with receiving(port=port) as receiver:
            receiver.answers = [(503, {}), (200, {})]
            second = dispatcher(h.state.engine)
            deadline = time.monotonic() + 30
            while len(receiver.received) < 2 and time.monotonic() < deadline:
                second.run_once()
                time.sleep(0.02)
            second.stop()
        [row] = (await h.client.get("/v1/webhooks/deliveries", headers=admin)).json()
        assert row["status"] == "succeeded"
        assert row["attempts"] == 3
        assert [a["status_code"] for a in row["attempt_log"]] == [None, 503, 200]
        assert row["attempt_log"][1]["error"] == "answered 503"
        # The same message each time: one webhook-id, the same body, signed anew.
        first_try, second_try = receiver.received
        assert first_try.headers["webhook-id"] == second_try.headers["webhook-id"]
        assert first_try.body == second_try.body
        assert json.loads(first_try.body)["type"] == "job.cancelled"
        verify(secret, second_try.headers, second_try.body)


async def test_a_rotated_secret_signs_beside_the_new_one_during_its_grace(
    make_client: Any, database_url: str
) -> None:
    async with make_client(database_url=database_url, webhook_allowed_networks=LOOPBACK) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        admin = h.headers("studio", ADMIN)
        with receiving() as receiver:
            endpoint = (await create_endpoint(h, admin, receiver.url)).json()
            old = endpoint["secret"]
            rotated = await h.client.post(
                f"/v1/webhooks/{endpoint['id']}/rotate-secret",
                headers=admin,
                json={"grace_seconds": 3600},
            )
            assert rotated.status_code == 200, rotated.text
            new = rotated.json()["secret"]
            assert new != old
            assert rotated.json()["previous_secret_expires_at"] is not None

            run = dispatcher(h.state.engine)
            job_id = (await submit(h.client, admin)).json()["id"]
            await h.client.delete(f"/v1/jobs/{job_id}", headers=admin)
            run.run_once()
            [during] = receiver.wait_for(1)
            assert len(during.headers["webhook-signature"].split()) == 2
            verify(new, during.headers, during.body)
            verify(old, during.headers, during.body)  # receivers not yet switched still verify

            ended = await h.client.post(
                f"/v1/webhooks/{endpoint['id']}/rotate-secret",
                headers=admin,
                json={"grace_seconds": 0},
            )
            newest = ended.json()["secret"]
            job_id = (await submit(h.client, admin)).json()["id"]
            await h.client.delete(f"/v1/jobs/{job_id}", headers=admin)
            run.run_once()
            run.stop()
            _, after = receiver.wait_for(2)
            verify(newest, after.headers, after.body)
            for stale in (old, new):
                with pytest.raises(InvalidSignature):
                    verify(stale, after.headers, after.body)

        audit = (await h.client.get("/v1/audit", headers=admin)).json()
        actions = [event["action"] for event in audit["events"]]
        assert actions.count("webhook.rotate_secret") == 2
        assert "webhook.create" in actions


async def test_only_tenants_with_an_endpoint_get_events(
    make_client: Any, database_url: str
) -> None:
    """The trigger on jobs writes an event when a job of a tenant with an enabled endpoint
    ends, whichever door ended it (here a cancel), and nothing for other tenants."""
    async with make_client(database_url=database_url) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        h.create_tenant("quiet", **DEBUG_TENANT_POLICY)
        admin, quiet = h.headers("studio", ADMIN), h.headers("quiet", ADMIN)
        created = await create_endpoint(h, admin, "https://hooks.example.com/facegate")
        assert created.status_code == 201, created.text
        for headers in (admin, quiet):
            job_id = (await submit(h.client, headers)).json()["id"]
            assert (await h.client.delete(f"/v1/jobs/{job_id}", headers=headers)).is_success
        with session_scope(h.state.session_factory) as session:
            events = [(e.tenant_id, e.event_type) for e in session.scalars(select(WebhookEvent))]
        assert events == [("studio", "job.cancelled")]

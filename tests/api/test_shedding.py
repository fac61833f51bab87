"""Load shedding: the in-flight cap and the global queued-jobs cap answer 503 problem+json
with Retry-After instead of piling work up."""

from __future__ import annotations

import uuid

import anyio
import httpx
from starlette.types import ASGIApp, Receive, Scope, Send
from tests.conftest import MakeClient

from facegate.api.shedding import LoadSheddingMiddleware, QueuedEstimate
from facegate.database import session_scope
from facegate.jobs.tables import Job


def create_blocking_app(release: anyio.Event, entered: anyio.Event) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == "/slow":
            entered.set()
            await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


async def test_in_flight_cap_sheds_and_recovers() -> None:
    release, entered = anyio.Event(), anyio.Event()
    shedding = LoadSheddingMiddleware(
        create_blocking_app(release, entered), max_in_flight=1, max_queued=0, retry_after=7
    )
    transport = httpx.ASGITransport(app=shedding)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        results: list[httpx.Response] = []

        async def slow() -> None:
            results.append(await client.get("/slow"))

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            await entered.wait()
            refused = await client.get("/fast")
            assert refused.status_code == 503
            assert refused.headers["Retry-After"] == "7"
            assert refused.headers["content-type"] == "application/problem+json"
            body = refused.json()
            assert body["type"].endswith("/overloaded")
            assert body["limit"] == "max_in_flight_requests"
            assert (await client.get("/healthz")).status_code == 200  # probes pass
            release.set()
        assert results[0].status_code == 200
        assert (await client.get("/fast")).status_code == 200  # the slot came back
        assert shedding.in_flight == 0


async def test_global_queue_cap_refuses_submissions(make_client: MakeClient) -> None:
    async with make_client(max_queued_jobs_total=2, shed_retry_after_seconds=9) as h:
        headers = h.headers("acme")
        with session_scope(h.state.session_factory) as session:
            for tenant in ("acme", "other"):
                if tenant == "other":
                    h.create_tenant("other")
                session.add(
                    Job(
                        id=uuid.uuid4(),
                        tenant_id=tenant,
                        status="queued",
                        kind="image",
                        spec={"processors": ["face_swapper"]},
                        inputs=["target"],
                        priority=0,
                        max_attempts=3,
                    )
                )
        refused = await h.client.post("/v1/jobs", headers=headers, files={"target": b"x"})
        assert refused.status_code == 503
        assert refused.headers["Retry-After"] == "9"
        body = refused.json()
        assert body["type"].endswith("/overloaded")
        assert body["limit"] == "max_queued_jobs_total"
        assert body["limit_value"] == 2
        assert "request_id" in body
        # reads are not submissions: they still pass
        assert (await h.client.get("/v1/jobs", headers=headers)).status_code == 200


def test_queued_estimate_is_reused_only_far_from_the_cap_and_while_recent() -> None:
    now = [100.0]
    estimate = QueuedEstimate(100, ttl=1.0, clock=lambda: now[0])
    assert estimate.fresh() is None  # never counted
    estimate.counted(50)
    assert estimate.fresh() == 50
    estimate.admitted()
    assert estimate.fresh() == 51  # this process's own submissions are added
    now[0] += 1.5
    assert estimate.fresh() is None  # too old: count again
    estimate.counted(89)
    assert estimate.fresh() == 89
    estimate.admitted()
    assert estimate.fresh() is None  # within a tenth of the cap: every decision counts


def test_queued_estimate_counts_every_time_under_a_small_cap() -> None:
    estimate = QueuedEstimate(2, clock=lambda: 0.0)
    estimate.counted(1)
    assert estimate.fresh() is None

"""A job whose estimated peak memory is over every worker's budget is refused at submission
(422 problem+json naming the limit, nothing stored); the live workers' registered budgets
decide in the cluster shape, this process's setting where none is registered."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

from jobhelpers import (
    DEBUG_TENANT_POLICY,
    count_jobs,
    count_objects,
    debug_options,
    is_problem,
    photo,
    submit,
)
from PIL import Image

from facegate.database import session_scope, utcnow
from facegate.jobs.cost import TargetShape, estimate_cost
from facegate.jobs.tables import WorkerRecord

MIB = 2**20
TARGET_WIDTH = 160


def estimate() -> int:
    """The estimate of a face_debugger job on the test photo (its height from its ratio)."""
    width, height = Image.open(io.BytesIO(photo(width=TARGET_WIDTH))).size
    return estimate_cost(
        ["face_debugger"], {}, TargetShape(width, height), video=False
    ).memory_bytes


def register_worker(state: Any, name: str, budget: int | None, *, age: float = 0.0) -> None:
    with session_scope(state.session_factory) as session:
        now = utcnow() - timedelta(seconds=age)
        session.add(
            WorkerRecord(
                id=name,
                hostname="h",
                pid=1,
                tenants=None,
                concurrency=2,
                memory_budget_bytes=budget,
                status="running",
                running_jobs=0,
                started_at=now,
                heartbeat_at=now,
            )
        )


async def test_a_job_over_this_process_budget_is_refused(make_client: Any) -> None:
    budget = estimate() - 1
    async with make_client(worker_memory_bytes=budget) as h:
        h.create_tenant("t", **DEBUG_TENANT_POLICY)
        answer = await submit(h.client, h.headers("t"), target=photo(width=TARGET_WIDTH))
        assert answer.status_code == 422
        assert is_problem(answer)
        body = answer.json()
        assert body["type"].endswith("/memory-budget-exceeded")
        assert body["limit"] == "worker_memory_bytes"
        assert body["limit_value"] == budget
        assert body["estimated_bytes"] == estimate()
        assert "worker_memory_bytes" in body["detail"]
        assert count_jobs(h.state) == 0
        assert count_objects(h.state) == 0

        # a batch with such an item is refused whole, nothing stored
        batch = await h.client.post(
            "/v1/batches",
            headers=h.headers("t"),
            files=[("target", ("a.jpg", photo(width=TARGET_WIDTH), "image/jpeg"))],
            data={"options": json.dumps({"processors": ["face_debugger"]})},
        )
        assert batch.status_code == 422
        assert batch.json()["type"].endswith("/memory-budget-exceeded")
        assert count_objects(h.state) == 0


async def test_a_job_within_the_budget_is_queued(make_client: Any) -> None:
    async with make_client(worker_memory_bytes=estimate()) as h:
        h.create_tenant("t", **DEBUG_TENANT_POLICY)
        answer = await submit(h.client, h.headers("t"), target=photo(width=TARGET_WIDTH))
        assert answer.status_code == 202, answer.text


async def test_the_live_workers_budgets_decide(make_client: Any) -> None:
    small = estimate() - 1
    async with make_client(worker_memory_bytes=small) as h:
        h.create_tenant("t", **DEBUG_TENANT_POLICY)
        headers = h.headers("t")
        image = photo(width=TARGET_WIDTH)
        # A silent worker with room does not count: the setting stands in.
        register_worker(h.state, "gone", 8 * 1024 * MIB, age=3600)
        assert (await submit(h.client, headers, target=image)).status_code == 422
        # A live one whose budget is too small refuses it as well, naming its budget.
        register_worker(h.state, "small", 64 * MIB)
        refused = await submit(h.client, headers, target=image)
        assert refused.status_code == 422
        assert refused.json()["limit_value"] == 64 * MIB
        # The largest live budget counts: a worker with room takes it.
        register_worker(h.state, "large", 4 * 1024 * MIB)
        assert (await submit(h.client, headers, target=image)).status_code == 202
        assert (await submit(h.client, headers, target=image, data=debug_options())).is_success

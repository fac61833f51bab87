"""Submissions racing with one Idempotency-Key, on SQLite and on PostgreSQL.

On SQLite the submissions queue for the write lock, so each later one finds the first job.
On PostgreSQL they run side by side: the losers' inserts hit the unique index, and each
must then delete the inputs it had stored and answer with the winner's job."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobhelpers import DEBUG_TENANT_POLICY, count_jobs, count_objects, stored_files, submit

from dbkit import create_schema, drop_schema, postgres_hint, postgres_url

pytestmark = pytest.mark.timeout(120)

RACERS = 6


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Settings overrides choosing the database (none: the test's SQLite file)."""
    if request.param == "sqlite":
        yield {}
        return
    base = postgres_url()
    if base is None:
        pytest.skip(postgres_hint("idempotency race"))
    schema, url = create_schema(base, "idem")
    try:
        yield {"database_url": url}
    finally:
        drop_schema(base, schema)


async def test_racing_submissions_with_one_key_make_one_job(
    make_client: Any, database: dict[str, Any]
) -> None:
    async with make_client(**database) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = {**h.headers("acme"), "Idempotency-Key": "order-7"}
        responses = await asyncio.gather(*(submit(h.client, headers) for _ in range(RACERS)))
        assert sorted(r.status_code for r in responses) == [200] * (RACERS - 1) + [202]
        assert len({r.json()["id"] for r in responses}) == 1
        assert count_jobs(h.state) == 1
        # Only the winner's input is left: the losers deleted what they had stored.
        assert count_objects(h.state) == 1
        assert len(stored_files(h.state)) == 1

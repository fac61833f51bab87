"""What one ``POST /v1/jobs`` and one poll (``GET /v1/jobs/{id}``) ask of the database,
counted (issue 28's 5 ms submission and fast polls; a count, not a time, so it holds on a
loaded machine). A poll is one SELECT of the columns its answer shows, a prepared read on
the driver (``facegate.prepared``), on SQLite on the event loop (no BEGIN or ROLLBACK, no
worker-thread hop).

The three steps of a submission (``facegate.jobs.service``) stay: a read-only transaction
(whether the tenant's policy as kept from an earlier submission still stands, with the
workers' memory budgets, in one statement; the queue cap and the quota together, unless
the tenant's last submission saw it far from both moments ago), then none while the
target is decoded and stored, then a write transaction (the queue cap and the quota again,
the ledger row, the job). Nothing more: the body guard reuses the
tenant's upload limit for a few seconds (no transaction of its own), the takedown blocks
are not read for a job without sources, and each reading is one statement."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from sqlalchemy import Engine, event
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, photo, submit

from dbkit import create_schema, drop_schema, postgres_hint, postgres_url

pytestmark = pytest.mark.timeout(120)

#: A submission's statements after the tenant's first one: each transaction's BEGIN (SQLite's
#: own; PostgreSQL's driver begins implicitly) and (verb, table) of the rest, in order.
SUBMISSION = [
    ("BEGIN", ""),  # step 1, read-only
    # the stamp of the policy kept from the first submission (facegate.tenancy.policycache)
    # and the workers' memory budgets, one statement
    ("SELECT", "tenants+policies+workers"),
    # (the queue cap and the quota: not read here, the tenant's last submission saw it far
    # from both moments ago: facegate.jobs.room)
    ("BEGIN", ""),  # step 3, the write lock
    ("SELECT", "jobs+stored_objects"),  # the queue cap and the quota, one statement
    ("INSERT", "jobs"),  # the job and its inputs' ledger rows: one INSERT a table
    ("INSERT", "stored_objects"),
]
#: Near its cap: step 1 reads both too (a refused request decodes nothing).
NEAR_THE_CAP = [*SUBMISSION[:2], ("SELECT", "jobs+stored_objects"), *SUBMISSION[2:]]


def describe(statement: str) -> tuple[str, str]:
    words = statement.split()
    verb = words[0].upper()
    if verb == "BEGIN":
        return verb, ""
    if verb == "INSERT":
        return verb, words[2].strip('"')
    tables = [
        name
        for name in ("tenants", "policies", "workers", "jobs", "stored_objects", "takedown_blocks")
        if f"FROM {name}" in statement or f"JOIN {name}" in statement
    ]
    return verb, "+".join(tables)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Settings overrides choosing the database (none: the test's SQLite file)."""
    if request.param == "sqlite":
        yield {}
        return
    base = postgres_url()
    if base is None:
        pytest.skip(postgres_hint("submission statements"))
    schema, url = create_schema(base, "submit")
    try:
        yield {"database_url": url}
    finally:
        drop_schema(base, schema)


@contextmanager
def statements_of(engine: Engine) -> Iterator[list[tuple[str, str]]]:
    seen: list[tuple[str, str]] = []

    def record(*args: Any) -> None:
        seen.append(describe(args[2]))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def test_a_submission_runs_its_checks_in_six_statements(
    make_client: Any, database: dict[str, Any]
) -> None:
    # Without the global queue cap: its count is reused for a second, re-read (one more
    # statement and hop) when the machine is slow enough to take longer between the two.
    async with make_client(**database, max_queued_jobs_total=0) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY, storage_quota_bytes=1 << 30)
        headers = h.headers("acme")
        target = photo()
        first = await submit(h.client, headers, target)  # authenticates, reads the limit
        assert first.status_code == 202, first.text
        with statements_of(h.state.engine) as seen:
            again = await submit(h.client, headers, target)
        assert again.status_code == 202, again.text
        begins = "database_url" not in database
        assert seen == [one for one in SUBMISSION if begins or one[0] != "BEGIN"]


async def test_near_its_cap_a_submission_reads_the_room_before_decoding(
    make_client: Any, database: dict[str, Any]
) -> None:
    async with make_client(**database, max_queued_jobs_total=0) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY, max_queued_jobs=3)
        headers = h.headers("acme")
        target = photo()
        first = await submit(h.client, headers, target)  # 1 of 3 queued: more than half
        assert first.status_code == 202, first.text
        with statements_of(h.state.engine) as seen:
            again = await submit(h.client, headers, target)
        assert again.status_code == 202, again.text
        begins = "database_url" not in database
        assert seen == [one for one in NEAR_THE_CAP if begins or one[0] != "BEGIN"]
        assert (await submit(h.client, headers, target)).status_code == 202
        refused = await submit(h.client, headers, target)  # the 4th: refused in step 1
        assert refused.status_code == 429, refused.text


@contextmanager
def thread_hops(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The worker-thread hops (``anyio.to_thread.run_sync``, FastAPI's and ours) made inside,
    by the name of what each ran."""
    hops: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(function: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(function, "__qualname__", type(function).__name__))
        return await run_sync(function, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(anyio.to_thread, "run_sync", counted)
        yield hops


async def test_a_submission_is_one_worker_thread_hop(
    make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync route itself, nothing more: authentication is cached on the loop, and the
    answer is serialised by the route (FastAPI would otherwise validate the returned model
    again, in a second hop). (The global queue cap's count, re-read at most once a second,
    is off here: on a slow machine it would fall between the two submissions.)"""
    async with make_client(max_queued_jobs_total=0) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = h.headers("acme")
        target = photo()
        assert (await submit(h.client, headers, target)).status_code == 202
        with thread_hops(monkeypatch) as hops:
            again = await submit(h.client, headers, target)
        assert again.status_code == 202, again.text
        assert again.headers["location"] == f"/v1/jobs/{again.json()['id']}"
        assert len(hops) == 1, hops


def test_the_queue_counts_read_no_job_columns() -> None:
    """The queue cap's counts select only the id under their LIMIT (every column of each
    queued job was built and thrown away: 2.5x the CPU of the reading on SQLite)."""
    from sqlalchemy.dialects import sqlite

    from facegate.jobs.repository import ROOM

    sql = str(ROOM.compile(dialect=sqlite.dialect()))
    assert "jobs.id" in sql
    assert "jobs.spec" not in sql
    assert "jobs.error_detail" not in sql


async def test_the_checks_still_refuse_past_the_queue_cap_and_the_quota(
    make_client: Any, database: dict[str, Any]
) -> None:
    """One statement reads both: each still refuses on its own."""
    async with make_client(**database) as h:
        target = photo()
        h.create_tenant("capped", **DEBUG_TENANT_POLICY, max_queued_jobs=1)
        capped = h.headers("capped")
        assert (await submit(h.client, capped, target)).status_code == 202
        refused = await submit(h.client, capped, target)
        assert refused.status_code == 429, refused.text
        assert refused.json()["limit"] == "max_queued_jobs"
        h.create_tenant("full", **DEBUG_TENANT_POLICY, storage_quota_bytes=len(target) + 10)
        full = h.headers("full")
        assert (await submit(h.client, full, target)).status_code == 202
        over = await submit(h.client, full, target)
        assert over.status_code == 507, over.text


async def test_a_poll_is_one_select_of_what_it_shows(
    make_client: Any, database: dict[str, Any]
) -> None:
    async with make_client(**database) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = h.headers("acme")
        job = (await submit(h.client, headers, photo())).json()
        await h.client.get(f"/v1/jobs/{job['id']}", headers=headers)  # authenticates
        ways: list[tuple[bool, int]] = []

        def how(conn: Any, *_: Any) -> None:
            ways.append((conn is None, threading.get_ident()))

        event.listen(h.state.engine, "before_cursor_execute", how)
        try:
            with statements_of(h.state.engine) as seen:
                polled = await h.client.get(f"/v1/jobs/{job['id']}", headers=headers)
        finally:
            event.remove(h.state.engine, "before_cursor_execute", how)
        assert polled.status_code == 200, polled.text
        assert polled.json()["status"] == "queued"
        assert seen == [("SELECT", "jobs")]
        # A prepared read on the driver (facegate.prepared: no Core connection), and on
        # SQLite on the event loop's own thread (no worker-thread hop).
        [(prepared, thread)] = ways
        assert prepared
        if "database_url" not in database:
            assert thread == threading.get_ident()


async def test_a_poll_of_another_tenants_job_is_a_404(
    make_client: Any, database: dict[str, Any]
) -> None:
    """The prepared read finds nothing for another tenant's id: the answer is the same 404
    as for a missing one (the removal check runs only then)."""
    async with make_client(**database) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        h.create_tenant("other", **DEBUG_TENANT_POLICY)
        job = (await submit(h.client, h.headers("acme"), photo())).json()
        theirs = await h.client.get(f"/v1/jobs/{job['id']}", headers=h.headers("other"))
        assert theirs.status_code == 404, theirs.text
        assert theirs.json()["detail"] == "no such job"
        ours = await h.client.get(f"/v1/jobs/{job['id']}", headers=h.headers("acme"))
        assert ours.status_code == 200
        assert ours.json()["id"] == job["id"]

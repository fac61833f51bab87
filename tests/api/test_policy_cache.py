"""A submission's tenant policy kept from the tenant's last one (facegate.tenancy.policycache)
stands only while its stamp is unchanged: a change to the policy or the tenant made by
another process (its own engine on the same database, as another API replica or the CLI
would) is seen by the very next submission, on SQLite and PostgreSQL. A suspension made
elsewhere refuses the next submission although the credentials cache still holds the key."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, photo, submit

from dbkit import create_schema, drop_schema, postgres_hint, postgres_url
from facegate.database import create_engine_from_url, create_session_factory, session_scope
from facegate.state import AppState
from facegate.tenancy.keycache import key_cache
from facegate.tenancy.policycache import STAMP, policy_cache
from facegate.tenancy.service import TenancyService
from facegate.tenancy.tables import Tenant

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Settings overrides choosing the database (none: the test's SQLite file)."""
    if request.param == "sqlite":
        yield {}
        return
    base = postgres_url()
    if base is None:
        pytest.skip(postgres_hint("the policy cache"))
    schema, url = create_schema(base, "policycache")
    try:
        yield {"database_url": url}
    finally:
        drop_schema(base, schema)


@contextmanager
def another_process(state: AppState) -> Iterator[Session]:
    """A transaction on an engine of its own (nothing of this app's: not its pool, not its
    caches' invalidation, which a change through the app's services would trigger)."""
    engine = create_engine_from_url(state.settings.database_url)
    try:
        with session_scope(create_session_factory(engine)) as session:
            yield session
    finally:
        engine.dispose()


async def test_a_policy_changed_elsewhere_holds_for_the_next_submission(
    make_client: Any, database: dict[str, Any]
) -> None:
    async with make_client(**database) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = h.headers("acme")
        target = photo()
        assert (await submit(h.client, headers, target)).status_code == 202
        assert (await submit(h.client, headers, target)).status_code == 202  # from the cache
        assert len(policy_cache(h.state.engine)) == 1
        with another_process(h.state) as session:
            TenancyService(session).get_policy("acme").allowed_processors = ["face_swapper"]
        refused = await submit(h.client, headers, target)
        assert refused.status_code == 403, refused.text
        assert refused.json()["limit"] == "allowed_processors"
        with another_process(h.state) as session:
            policy = TenancyService(session).get_policy("acme")
            policy.allowed_processors = ["face_swapper", "face_debugger"]
            policy.max_input_bytes = len(target) - 1
        too_big = await submit(h.client, headers, target)
        assert too_big.status_code == 413, too_big.text
        with another_process(h.state) as session:
            TenancyService(session).get_policy("acme").max_input_bytes = 10 * len(target)
        assert (await submit(h.client, headers, target)).status_code == 202


async def test_a_tenant_suspended_elsewhere_is_refused_on_the_next_submission(
    make_client: Any, database: dict[str, Any]
) -> None:
    """Its key is still in this process's credentials cache (another process's change
    reaches that only after AUTH_CACHE_SECONDS): the policy's stamp refuses it, and drops
    the key from that cache so that its other requests are refused as well."""
    async with make_client(**database) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        h.create_tenant("other", **DEBUG_TENANT_POLICY)
        headers, others = h.headers("acme"), h.headers("other")
        target = photo()
        job = await submit(h.client, headers, target)
        assert job.status_code == 202
        assert (await submit(h.client, others, target)).status_code == 202
        cached = len(key_cache)
        with another_process(h.state) as session:
            session.execute(update(Tenant).where(Tenant.id == "acme").values(status="suspended"))
        assert len(key_cache) == cached  # nothing told this process
        refused = await submit(h.client, headers, target)
        assert refused.status_code == 401, refused.text
        assert refused.json()["detail"] == "tenant suspended"
        polled = await h.client.get(f"/v1/jobs/{job.json()['id']}", headers=headers)
        assert polled.status_code == 401, polled.text
        assert (await submit(h.client, others, target)).status_code == 202  # not its tenant
        with another_process(h.state) as session:
            session.execute(update(Tenant).where(Tenant.id == "acme").values(status="active"))
        assert (await submit(h.client, headers, target)).status_code == 202


async def test_a_tenant_being_erased_elsewhere_is_refused_as_before(
    make_client: Any, database: dict[str, Any]
) -> None:
    """A stamp of a tenant being erased goes the uncached way, which refuses it (409), as
    without the cache; once active again its submissions pass."""
    async with make_client(**database) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = h.headers("acme")
        target = photo()
        assert (await submit(h.client, headers, target)).status_code == 202
        with another_process(h.state) as session:
            session.execute(update(Tenant).where(Tenant.id == "acme").values(status="erasing"))
        erasing = await submit(h.client, headers, target)
        assert erasing.status_code == 409, erasing.text
        with another_process(h.state) as session:
            session.execute(update(Tenant).where(Tenant.id == "acme").values(status="active"))
        assert (await submit(h.client, headers, target)).status_code == 202


async def test_the_kept_policy_is_a_copy_no_session_holds(
    make_client: Any, database: dict[str, Any]
) -> None:
    """Requests share it across threads: it must not be an object of the session that read
    it (expired, refreshed or lazily loaded later), and tenants never share one."""
    async with make_client(**database) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY, max_queued_jobs=7)
        h.create_tenant("other", **DEBUG_TENANT_POLICY, max_queued_jobs=9)
        target = photo()
        for tenant in ("acme", "other"):
            assert (await submit(h.client, h.headers(tenant), target)).status_code == 202
        cache = policy_cache(h.state.engine)
        with session_scope(h.state.session_factory, read_only=True) as session:
            stamps = {
                tenant: session.execute(STAMP, {"tenant_id": tenant}).one()
                for tenant in ("acme", "other")
            }
            kept = {tenant: cache.policy(session, tenant, stamps[tenant]) for tenant in stamps}
            assert all(policy not in session for policy in kept.values())
            again = cache.policy(session, "acme", stamps["acme"])
        assert again is kept["acme"]  # the stamp is unchanged: the kept one
        assert kept["acme"].max_queued_jobs == 7
        assert kept["other"].max_queued_jobs == 9
        assert set(kept["acme"].allowed_processors) == {"face_swapper", "face_debugger"}

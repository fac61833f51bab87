"""POST /v1/reports cannot fill a tenant's audit trail: the same report again is the same
case (one audit event), a reporter opens at most ``reports_per_hour`` cases (then 429
problem+json with Retry-After, for that client only; an IPv6 client by its /64), and one
job takes at most ``reports_per_subject`` cases a window from distinct reporters. Through a
real uvicorn server, clients told apart by X-Forwarded-For from a trusted proxy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, is_problem, photo
from tests.conftest import make_settings
from tests.liveserver import serving
from tests.provenance.test_verify_api import marked_result

from facegate.api.app import create_app
from facegate.database import (
    create_engine_from_url,
    create_session_factory,
    migrate,
    session_scope,
)
from facegate.observability.audit.tables import AuditEvent
from facegate.principal import ALL_SCOPES
from facegate.provenance.keys import create_keys
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)
PER_HOUR = 3


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp: Path = tmp_path_factory.mktemp("reports")
    url = f"sqlite:///{tmp}/facegate.db"
    migrate(url)
    settings = make_settings(
        tmp,
        rate_limit_enabled=True,
        trusted_proxies=["127.0.0.1/32"],  # X-Forwarded-For names the client
        reports_per_hour=PER_HOUR,
    )
    create_keys(settings.provenance_path)
    with serving(create_app(settings, services=[])) as base:
        yield base, url


def report_events(url: str) -> list[AuditEvent]:
    engine = create_engine_from_url(url)
    try:
        with session_scope(create_session_factory(engine)) as session:
            return list(
                session.scalars(select(AuditEvent).where(AuditEvent.action == "provenance.report"))
            )
    finally:
        engine.dispose()


def send(base: str, client: str, data: bytes, message: str = "seen on a forum") -> httpx.Response:
    return httpx.post(
        f"{base}/v1/reports",
        headers={"X-Forwarded-For": client},
        files=[("file", ("found.jpg", data, "image/jpeg"))],
        data={"message": message},
        timeout=60,
    )


def test_twenty_identical_anonymous_reports_make_one_audit_event(live: tuple[str, str]) -> None:
    base, url = live
    before = len(report_events(url))
    data = photo("man_frontal_glasses.jpg", width=200)
    answers = [send(base, "203.0.113.10", data) for _ in range(20)]
    assert [a.status_code for a in answers] == [202] * 20
    assert len({a.json()["report_id"] for a in answers}) == 1
    assert len(report_events(url)) == before + 1
    # The report id is opaque: not the audit trail's sequence number.
    assert not answers[0].json()["report_id"].isdigit()


def test_reports_beyond_the_rate_answer_429_for_that_client_only(live: tuple[str, str]) -> None:
    base, url = live
    before = len(report_events(url))
    # Distinct files: each is a new case (the same file again would be the same case).
    files = [photo(width=200 + i) for i in range(PER_HOUR + 2)]
    answers = [send(base, "203.0.113.20", data) for data in files[: PER_HOUR + 1]]
    assert [a.status_code for a in answers] == [202] * PER_HOUR + [429]
    refused = answers[-1]
    assert is_problem(refused)
    assert refused.json()["type"].endswith("rate-limited")
    assert int(refused.headers["Retry-After"]) > 0
    assert len(report_events(url)) == before + PER_HOUR
    # Another client is not held by it.
    assert send(base, "203.0.113.21", files[0]).status_code == 202
    # An IPv6 client is one /64: changing the low bits does not buy more reports.
    v6 = [send(base, f"2001:db8:1:2::{i + 1:x}", files[i]).status_code for i in range(PER_HOUR + 1)]
    assert v6 == [202] * PER_HOUR + [429]


async def test_a_job_reported_again_and_again_stays_one_case_per_reporter(
    make_client: Any,
) -> None:
    async with make_client(services=[workers_service], workers=1, reports_per_subject=2) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        owner = h.headers("studio")
        admin = h.headers("ops", scopes=ALL_SCOPES)
        job_id, data = await marked_result(h.client, owner)

        async def report(headers: dict[str, str] | None = None) -> httpx.Response:
            return await h.client.post(
                "/v1/reports",
                headers=headers or {},
                files=[("file", ("found.jpg", data, "image/jpeg"))],
                data={"message": "posted as real"},
            )

        anonymous = [await report() for _ in range(20)]
        assert {a.status_code for a in anonymous} == {202}
        assert all(a.json()["made_by_this_installation"] for a in anonymous)

        def seen(page: httpx.Response) -> list[dict[str, Any]]:
            return [e for e in page.json()["events"] if e["action"] == "provenance.report"]

        auditor = h.headers("studio", scopes=["audit:read"])
        events = seen(await h.client.get("/v1/audit", headers=auditor))
        assert [e["target"] for e in events] == [f"job:{job_id}"]
        assert events[0]["details"]["report_id"] == anonymous[0].json()["report_id"]
        # A second reporter opens a case; a third finds the job's share taken and joins it.
        rival = h.headers("rival")
        second = await report(rival)
        third = await report(h.headers("initech"))
        assert second.status_code == third.status_code == 202
        assert third.json()["report_id"] == second.json()["report_id"]
        assert len(seen(await h.client.get("/v1/audit", headers=auditor))) == 2
        assert len(seen(await h.client.get("/v1/audit", headers=admin))) == 2

"""Issue 26's library decisions: a face saved to the library is moderated as a job's source
(refused with content-policy-violation, audited and counted; nothing saved), and face
analysis in the API process is bounded (process-wide slots with a per-tenant share, refused
at once with 429 / 503 problem+json), through a real uvicorn server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, is_problem, photo
from tests.conftest import make_settings
from tests.liveserver import serving
from tests.moderationkit import decisions, install_standin, marked

from facegate.api.app import create_app
from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.engine.faces import FaceAnalyser
from facegate.library.tables import LibraryFace
from facegate.observability.audit.tables import AuditEvent
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

pytestmark = pytest.mark.timeout(240)
DIRECTOR = ("director",)


async def save(h: Any, headers: dict[str, str], image: bytes, name: str) -> Any:
    return await h.client.post(
        "/v1/faces/library",
        headers=headers,
        files={"image": ("face.jpg", image, "image/jpeg")},
        data={"name": name},
    )


def moderation_events(h: Any) -> list[AuditEvent]:
    with session_scope(h.state.session_factory) as session:
        rows = session.scalars(select(AuditEvent).order_by(AuditEvent.seq)).all()
        return [e for e in rows if e.action.startswith("moderation.")]


def saved_faces(h: Any) -> list[str]:
    with session_scope(h.state.session_factory) as session:
        return [face.name for face in session.scalars(select(LibraryFace)).all()]


async def test_a_saved_face_is_moderated(make_client: Any, tmp_path: Path) -> None:
    install_standin(tmp_path / "models")
    async with make_client() as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        h.create_tenant("lax", **{**DEBUG_TENANT_POLICY, "moderation": False})
        director = h.headers("studio", DIRECTOR)
        before = decisions((await h.client.get("/metrics")).text, "studio")

        refused = await save(h, director, marked(photo()), "flagged")
        assert refused.status_code == 422, refused.text
        assert is_problem(refused)
        assert refused.json()["type"].endswith("/content-policy-violation")
        assert refused.json()["detail"] == "library image was refused by content moderation"
        assert "flagged" not in saved_faces(h)

        clean = await save(h, director, photo(), "clean")
        assert clean.status_code == 201, clean.text

        events = moderation_events(h)
        assert [(e.action, e.target, e.actor, e.tenant_id) for e in events] == [
            ("moderation.refused", "face-library", "system:moderation", "studio"),
            ("moderation.allowed", f"face:{clean.json()['id']}", "system:moderation", "studio"),
        ]
        assert events[0].details["refused"] == "library image"
        after = decisions((await h.client.get("/metrics")).text, "studio")
        assert after.get("refused", 0) - before.get("refused", 0) == 1
        assert after.get("allowed", 0) - before.get("allowed", 0) == 1

        # a tenant whose moderation an admin turned off saves it (counted as disabled)
        before = decisions((await h.client.get("/metrics")).text, "lax")
        unmoderated = await save(h, h.headers("lax", DIRECTOR), marked(photo()), "lax")
        assert unmoderated.status_code == 201, unmoderated.text
        after = decisions((await h.client.get("/metrics")).text, "lax")
        assert after.get("disabled", 0) - before.get("disabled", 0) == 1


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], Any]]:
    """A live server with 2 analysis slots, 1 per tenant, and keys of three tenants."""
    settings = make_settings(tmp_path, face_analysis_slots=2, face_analysis_per_tenant=1)
    migrate(settings.database_url)
    engine = create_engine_from_url(settings.database_url)
    keys = {}
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        for tenant in ("acme", "globex", "initech"):
            service.create_tenant(TenantSpec(id=tenant, policy=PolicySpec()))
            keys[tenant] = service.create_key(tenant, KeyCreate(scopes=["jobs:write"])).token
    engine.dispose()
    app = create_app(settings, services=[])
    with serving(app) as base:
        yield base, keys, app


def test_face_analysis_is_bounded_per_process_and_per_tenant(
    gated: tuple[str, dict[str, str], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, keys, app = gated
    release = threading.Event()
    analyse = FaceAnalyser.analyse
    running: list[int] = []  # one entry per analysis under way

    def held(self: FaceAnalyser, frame: Any, *args: Any, **kwargs: Any) -> Any:
        running.append(1)
        release.wait(30)  # a slow (40 MP) analysis, as long as the test needs
        return analyse(self, frame, *args, **kwargs)

    monkeypatch.setattr(FaceAnalyser, "analyse", held)
    image = photo()

    def detect(tenant: str) -> httpx.Response:
        return httpx.post(
            f"{base}/v1/faces",
            headers={"Authorization": f"Bearer {keys[tenant]}"},
            files={"image": ("face.jpg", image, "image/jpeg")},
            timeout=5,  # a refusal comes at once; a call queued behind the others times out
        )

    def wait_running(count: int) -> None:
        for _ in range(400):
            if len(running) == count:
                return
            threading.Event().wait(0.025)
        raise AssertionError(f"{len(running)} analyses running, not {count}")

    with ThreadPoolExecutor(2) as pool:
        try:
            first = pool.submit(detect, "acme")
            wait_running(1)
            # acme holds its share: its next call is refused at once, naming the share
            second = detect("acme")
            assert second.status_code == 429, second.text
            assert is_problem(second)
            assert second.json()["limit"] == "face_analysis_per_tenant"
            assert second.headers["Retry-After"] == "2"
            other = pool.submit(detect, "globex")
            wait_running(2)
            # the process is full: a third tenant is refused at once (503), not queued
            third = detect("initech")
            assert third.status_code == 503, third.text
            assert is_problem(third)
            assert third.json()["limit"] == "face_analysis_slots"
            assert "Retry-After" in third.headers
        finally:
            release.set()
        assert first.result().status_code == 200
        assert other.result().status_code == 200
    assert app.state.facegate.face_analysis.in_use() == 0
    assert detect("initech").status_code == 200

"""One list of sensitive processors: each processor's ``sensitive`` class attribute. The
submission audit, the consent policy and the console (``/v1/capabilities``) read it; this
test flips the declaration of each processor and fails if any of them disagrees (a second
list anywhere would make one processor sensitive in one place only), and a lint fails on a
module that spells out processor names beside the word "sensitive"."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from jobhelpers import photo
from sqlalchemy import select
from tests.api.jobhelpers import job_files

from facegate.consent.service import ConsentService
from facegate.database import session_scope
from facegate.engine.processors.registry import PROCESSORS, processor_class, sensitive_processors
from facegate.errors import InvalidInput
from facegate.jobs.observe import audit_submission
from facegate.jobs.tables import Job
from facegate.observability.audit.tables import AuditEvent
from facegate.principal import Principal

pytestmark = pytest.mark.timeout(120)

SRC = Path(__file__).resolve().parents[2] / "src" / "facegate"
# These two may name processors and say "sensitive": the declaration and its one reader.
DECLARATION = {"engine/processors/registry.py", "engine/processors/base.py"}


def readers(h: Any, processor: str) -> dict[str, bool]:
    """Whether the submission audit and the consent policy treat ``processor`` as sensitive
    (every processor, installed or not: asked through their functions)."""
    principal = Principal("acme", frozenset({"jobs:write"}), "key:k1")
    job = Job(id=uuid.uuid4(), tenant_id="acme", kind="image", spec={"processors": [processor]})
    with session_scope(h.state.session_factory) as session:
        audit_submission(session, principal, job, {"target": "0" * 64})
        audited = session.scalars(
            select(AuditEvent).where(AuditEvent.target == f"job:{job.id}")
        ).all()
        try:
            ConsentService(session).check(None, 1, True, [processor])
            consent = False
        except InvalidInput:
            consent = True
        session.rollback()
    return {"audit": bool(audited), "consent policy": consent}


async def through_the_api(h: Any, processor: str) -> dict[str, bool]:
    """The same readers and the console's (/v1/capabilities), through HTTP: for the
    processors that are installed without model files."""
    tenant = f"t-{processor.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    h.create_tenant(tenant, allowed_processors=[processor], require_consent=True)
    headers = h.headers(tenant)
    capabilities = (await h.client.get("/v1/capabilities", headers=headers)).json()
    assert processor in capabilities["processors"]
    options = json.dumps({"processors": [processor]})
    submitted = await h.client.post(
        "/v1/jobs", headers=headers, files=job_files(photo(), [photo()]), data={"options": options}
    )
    consent = json.dumps({"attested_by": "Jane Roe", "statement_version": "v1"})
    attested = await h.client.post(
        "/v1/jobs",
        headers=headers,
        files=job_files(photo(), [photo()]),
        data={"options": options, "consent": consent},
    )
    assert attested.status_code == 202, attested.text
    with session_scope(h.state.session_factory) as session:
        actions = set(
            session.scalars(select(AuditEvent.action).where(AuditEvent.tenant_id == tenant))
        )
    return {
        "console": processor in capabilities["sensitive_processors"],
        "consent policy": submitted.status_code == 422
        and submitted.json()["type"].endswith("consent-required"),
        "audit": "job.sensitive_processors" in actions,
    }


def agree(seen: dict[str, bool], declared: bool) -> None:
    assert seen == dict.fromkeys(seen, declared), seen


@pytest.mark.parametrize("processor", sorted(PROCESSORS))
async def test_every_reader_follows_the_declaration(
    make_client: Any, monkeypatch: pytest.MonkeyPatch, processor: str
) -> None:
    cls = processor_class(processor)
    declared = cls.sensitive
    assert (processor in sensitive_processors()) == declared
    async with make_client() as h:
        agree(readers(h, processor), declared)
        # Flip the one declaration: every reader must follow it.
        monkeypatch.setattr(cls, "sensitive", not declared)
        agree(readers(h, processor), not declared)


@pytest.mark.parametrize("processor", ["face_debugger", "face_swapper"])
async def test_the_console_follows_the_declaration_too(
    make_client: Any, monkeypatch: pytest.MonkeyPatch, processor: str
) -> None:
    cls = processor_class(processor)
    declared = cls.sensitive
    async with make_client() as h:
        agree(await through_the_api(h, processor), declared)
        monkeypatch.setattr(cls, "sensitive", not declared)
        agree(await through_the_api(h, processor), not declared)


def test_the_expected_processors_are_sensitive() -> None:
    # They change who a face is, or how old, or its expression.
    assert sensitive_processors() == ["age_modifier", "expression_restorer", "face_swapper"]


def test_no_second_list_of_sensitive_processors() -> None:
    names = "|".join(PROCESSORS)
    offenders = []
    for path in sorted([*SRC.rglob("*.py"), *SRC.rglob("*.js"), *SRC.rglob("*.html")]):
        relative = path.relative_to(SRC).as_posix()
        if relative in DECLARATION or relative.startswith("engine/processors/"):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            # the word, and a name on its line or the next two (a literal set split up)
            nearby = " ".join(lines[number - 1 : number + 2])
            if re.search("sensitive", line, re.I) and re.search(rf"\b({names})\b", nearby):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []

"""Property-based fuzzing of the whole OpenAPI document (schemathesis) against the live app
(uvicorn on a local port), once with a tenant's API key and once with a platform admin's:
no 5xx, every status, content type, body and header as the schema declares them, every
error problem+json."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tests.conftest import make_settings
from tests.liveserver import serving

from facegate.api.app import create_app
from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.provenance.marker import marker_for
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

pytestmark = pytest.mark.timeout(300)
TOKEN: dict[str, str] = {}
SEEN: dict[str, Counter[int]] = {"tenant": Counter(), "admin": Counter()}
# schemathesis' response checks: server errors, and conformance to the declared schema.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module")
def live_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    url = f"sqlite:///{tmp}/facegate.db"
    migrate(url)
    engine = create_engine_from_url(url)
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        # A rate limit the run never reaches: every case must reach the route.
        policy = PolicySpec(
            allowed_processors=["face_swapper", "face_debugger"], requests_per_minute=1_000_000
        )
        service.create_tenant(TenantSpec(id="fuzz", policy=policy))
        scopes = KeyCreate(scopes=["jobs:write", "jobs:read", "usage:read"])
        TOKEN["tenant"] = service.create_key("fuzz", scopes).token
        service.create_tenant(TenantSpec(id="ops", policy=policy))
        TOKEN["admin"] = service.create_key("ops", KeyCreate(scopes=["admin"])).token
    engine.dispose()
    settings_ = make_settings(tmp, rate_limit_enabled=True, rate_limit_ip_per_minute=1_000_000)
    # A complete installation: its provenance identity exists (POST /v1/verify needs it).
    marker_for(settings_.provenance_path, create=True)
    with serving(create_app(settings_, services=[])) as base:
        yield schemathesis.openapi.from_url(f"{base}/openapi.json")


def check_case(case: Any, who: str) -> None:
    # The real key replaces whatever credentials were generated.
    headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "x-api-key"}
    headers["Authorization"] = f"Bearer {TOKEN[who]}"
    case.headers = headers
    response = case.call(timeout=30)
    content_type = response.headers.get("content-type") or [""]
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    SEEN[who][response.status_code] += 1
    # A binary answer (a result image, a tenant's export ZIP) is named by its type.
    textual = content_type.startswith(("application/json", "application/problem+json", "text/"))
    body_text = response.text[:300] if textual else content_type
    where = (case.method, case.formatted_path, response.status_code, body_text)
    assert response.status_code < 500, where
    case.validate_response(response, checks=CHECKS)
    if response.status_code >= 400:
        assert content_type.startswith("application/problem+json"), where
        body = response.json()
        assert body["status"] == response.status_code, where
        assert isinstance(body["type"], str), where
        assert isinstance(body["detail"], str), where


@pytest.mark.parametrize("who", ["tenant", "admin"])
def test_no_5xx_no_schema_violation_every_error_problem_json(live_schema: Any, who: str) -> None:
    operations = [result.ok() for result in live_schema.get_all_operations()]
    paths = {operation.path for operation in operations}
    assert {
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/result",
        "/v1/jobs/{job_id}/events",
        "/v1/capabilities",
    } <= paths
    cases = [(op, mode) for op in operations for mode in GenerationMode]
    for operation, mode in cases:
        # schemathesis' pytest plugin does not load under this pytest; drive Hypothesis
        # directly, one small property per operation and mode (valid data, then invalid).
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=6,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: Any) -> None:
            check_case(case, who)

        try:
            fuzz()
        except Unsatisfiable:
            if mode is GenerationMode.POSITIVE:
                raise  # an operation with no invalid input (no parameters, no body) is fine
    # the key really authenticated: successes and client errors past authentication
    seen = SEEN[who]
    assert seen[200] > 0, seen
    assert seen[404] + seen[422] > 0, seen
    print("status codes seen:", dict(seen))

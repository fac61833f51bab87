"""Property-based fuzzing of the whole OpenAPI document (schemathesis) against the live app
(uvicorn on a local port) with a real tenant's API key: no 5xx, every error problem+json."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from tests.liveserver import serving

from facegate.api.app import create_app
from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.settings import Settings
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

pytestmark = pytest.mark.timeout(300)
TOKEN: dict[str, str] = {}
SEEN: Counter[int] = Counter()


@pytest.fixture(scope="module")
def live_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    url = f"sqlite:///{tmp}/facegate.db"
    migrate(url)
    engine = create_engine_from_url(url)
    with session_scope(create_session_factory(engine)) as session:
        service = TenancyService(session)
        policy = PolicySpec(allowed_processors=["face_swapper", "face_debugger"])
        service.create_tenant(TenantSpec(id="fuzz", policy=policy))
        scopes = KeyCreate(scopes=["jobs:write", "jobs:read", "usage:read"])
        TOKEN["value"] = service.create_key("fuzz", scopes).token
    engine.dispose()
    settings_ = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=url,
        storage_url=f"file://{tmp}/storage",
        data_dir=tmp,
        models_dir=tmp / "models",
        workers=0,
    )
    with serving(create_app(settings_, services=[])) as base:
        yield schemathesis.openapi.from_url(f"{base}/openapi.json")


def check_case(case: Any) -> None:
    # The real tenant's key replaces whatever credentials were generated.
    headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "x-api-key"}
    headers["Authorization"] = f"Bearer {TOKEN['value']}"
    case.headers = headers
    response = case.call(timeout=30)
    content_type = response.headers.get("content-type") or [""]
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    SEEN[response.status_code] += 1
    where = (case.method, case.formatted_path, response.status_code, response.text[:300])
    assert response.status_code < 500, where
    if response.status_code >= 400:
        assert content_type.startswith("application/problem+json"), where
        body = response.json()
        assert body["status"] == response.status_code, where
        assert isinstance(body["type"], str), where
        assert isinstance(body["detail"], str), where


def test_no_5xx_and_every_error_is_problem_json(live_schema: Any) -> None:
    operations = [result.ok() for result in live_schema.get_all_operations()]
    paths = {operation.path for operation in operations}
    assert {
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/result",
        "/v1/jobs/{job_id}/events",
        "/v1/capabilities",
    } <= paths
    for operation in operations:
        # schemathesis' pytest plugin does not load under this pytest; drive Hypothesis
        # directly, one small property per operation.
        @given(case=operation.as_strategy())
        @settings(
            max_examples=6,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: Any) -> None:
            check_case(case)

        fuzz()
    # the key really authenticated: successes and client errors past authentication
    assert SEEN[200] > 0, SEEN
    assert SEEN[404] + SEEN[422] > 0, SEEN
    print("status codes seen:", dict(SEEN))

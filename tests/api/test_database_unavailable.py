"""An unreachable database answers 503 problem+json with Retry-After, never a 500."""

from __future__ import annotations

from tests.conftest import MakeClient

from facegate.database import create_engine_from_url, create_session_factory


async def test_unreachable_database_is_503_problem(make_client: MakeClient) -> None:
    async with make_client(raise_app_exceptions=False) as h:
        headers = h.headers("acme")
        # Nothing listens on port 1: every connection attempt is refused, as during a
        # PostgreSQL restart.
        dead = create_engine_from_url("postgresql://postgres@127.0.0.1:1/test")
        h.state.engine, live = dead, h.state.engine
        h.state.session_factory = create_session_factory(dead)
        try:
            response = await h.client.get("/v1/me", headers=headers)
        finally:
            h.state.engine = live
            dead.dispose()
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "5"
    body = response.json()
    assert body["type"].endswith("/service-unavailable")
    assert "database" in body["detail"]

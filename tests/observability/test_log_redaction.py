"""A failing request's log holds no secret: no frame locals (they held ``Settings``), URLs
with credentials masked, every configured secret masked wherever it appears."""

from __future__ import annotations

import json
from typing import Any

from facegate.observability.redaction import MASK, Redactor

DATABASE_PASSWORD = "pg-Pa55word-never-logged"
REDIS_PASSWORD = "redis-S3cret-never-logged"
JWT_SECRET = "hs-secret-never-logged-0123456789abcdef"


async def test_a_500_logs_no_secret_and_no_locals(make_client: Any, captured_logs: Any) -> None:
    settings = {
        "redis_url": f"redis://:{REDIS_PASSWORD}@127.0.0.1:9/0",  # unreachable: fails open
        "jwt_hs_secret": JWT_SECRET,
        "jwt_issuer": "https://idp.test",
        "jwt_audience": "facegate",
    }
    async with make_client(raise_app_exceptions=False, **settings) as h:
        configured = h.state.settings

        @h.app.get("/boom")
        def boom() -> None:
            dsn = f"postgresql://facegate:{DATABASE_PASSWORD}@db.internal/facegate"
            held = configured  # a frame local holding the settings, as in the real 500s
            raise RuntimeError(f"cannot reach {dsn} as {REDIS_PASSWORD} ({held!r})")

        response = await h.client.get("/boom")
    assert response.status_code == 500
    text = captured_logs.getvalue()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    failure = next(line for line in lines if line["event"] == "unhandled error")
    assert failure["exception"][0]["exc_type"] == "RuntimeError"
    for secret in (DATABASE_PASSWORD, REDIS_PASSWORD, JWT_SECRET):
        assert secret not in text
    assert "locals" not in json.dumps(failure)
    assert len(json.dumps(failure)) < 20_000  # was 134-470 KB with every frame's locals


def test_the_redactor_masks_urls_and_configured_values() -> None:
    redactor = Redactor()
    redactor.configure(["tok3n-value", "abc"])  # too short to search for: left alone
    assert redactor.text("redis://:pw@host:6379/0") == f"redis://{MASK}@host:6379/0"
    assert redactor.text("s3://AKIA:SECRET@minio/b") == f"s3://{MASK}@minio/b"
    assert redactor.text("postgresql://host/db") == "postgresql://host/db"
    assert redactor.value({"a": ["x tok3n-value y"], "abc": "abc"}) == {
        "a": [f"x {MASK} y"],
        "abc": "abc",
    }

"""Plain helpers for the gateway tests: the test Redis, unique key prefixes, closed ports."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

REDIS_SKIP = (
    "Redis tests: set FACEGATE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 (or CI=true) "
    "with a Redis server listening there"
)


def test_redis_url() -> str | None:
    url = os.environ.get("FACEGATE_TEST_REDIS_URL")
    if url:
        return url
    return "redis://127.0.0.1:6379/0" if os.environ.get("CI") == "true" else None


test_redis_url.__test__ = False  # type: ignore[attr-defined]


def require_redis() -> str:
    url = test_redis_url()
    if url is None:
        pytest.skip(REDIS_SKIP)
    return url


def unique_prefix() -> str:
    return f"fgtest-{uuid.uuid4().hex[:12]}"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def backend_url(backend: str) -> str | None:
    """The FACEGATE_REDIS_URL of a parametrised backend: ``memory`` → None."""
    return require_redis() if backend == "redis" else None

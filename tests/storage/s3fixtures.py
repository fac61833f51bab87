"""Fixtures for the S3 adapter's tests (imported by the test modules that use them; a
conftest.py here would shadow the root one for `from conftest import ...`): a moto S3 server
on loopback (the real S3 protocol over HTTP, no AWS account), and stores on fresh buckets."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from storagefactories import S3Factory
from tests.motokit import moto_server

from facegate.resilience import BreakerConfig, CircuitBreaker
from facegate.storage.s3 import S3Options, S3Store


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def moto_client(moto_endpoint: str) -> Any:
    """One boto3 client for the contract tests (making one takes a good fraction of a
    second; the stores under test only differ in options)."""
    session = boto3.session.Session(
        aws_access_key_id="facegate-test", aws_secret_access_key="facegate-test-secret"
    )
    config = Config(s3={"addressing_style": "path"}, signature_version="s3v4")
    return session.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1", config=config)


@pytest.fixture
def s3_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    # boto3 reads the standard environment; moto accepts any credentials.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "facegate-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "facegate-test-secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture
def make_s3_store(moto_endpoint: str, moto_client: Any, s3_credentials: None) -> S3Factory:
    """``make_s3_store(**S3Options fields)`` -> an S3Store on a bucket of its own, with a
    breaker of its own (tests must not share the process's ``s3`` breaker)."""

    def factory(**fields: object) -> S3Store:
        values: dict[str, object] = {
            "bucket": f"fg-{uuid.uuid4().hex[:16]}",
            "endpoint_url": moto_endpoint,
            "timeout_seconds": 5.0,
        }
        values.update(fields)
        options = S3Options(**values)  # type: ignore[arg-type]
        default = options.endpoint_url == moto_endpoint and options.region == "us-east-1"
        client = moto_client if default and options.timeout_seconds == 5.0 else None
        breaker = CircuitBreaker("s3", BreakerConfig(3, 30.0))
        return S3Store(options, client=client, breaker=breaker)

    return factory

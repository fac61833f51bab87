"""S3Store through the real S3 protocol (moto's server on loopback): multipart uploads,
presigned downloads, the two tenant layouts, error translation and the breaker."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import httpx
import pytest
import s3fixtures
from storagefactories import S3Factory, create_database, create_tenant
from tests.conftest import make_settings

from facegate.api.errors import as_problem
from facegate.database import session_scope
from facegate.jobs.runtime import tenant_store_for
from facegate.models.installed import installation_model_store
from facegate.resilience import BreakerConfig, CircuitOpen
from facegate.storage.base import InvalidKey, ObjectNotFound, StorageError
from facegate.storage.factory import store_from_url
from facegate.storage.memory import MemoryStore
from facegate.storage.remote_models import ObjectStorageModels
from facegate.storage.s3 import MIB, S3Options, S3Store, S3Unavailable
from facegate.storage.tenant import TenantStore, build_key

# Fixtures are found by name in the test module.
moto_endpoint = s3fixtures.moto_endpoint
moto_client = s3fixtures.moto_client
s3_credentials = s3fixtures.s3_credentials
make_s3_store = s3fixtures.make_s3_store

JOB = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_big_objects_go_up_in_parts(make_s3_store: S3Factory) -> None:
    store = make_s3_store(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)
    payload = bytes(range(256)) * (11 * MIB // 256 + 1)
    chunks = (payload[i : i + 700_000] for i in range(0, len(payload), 700_000))
    assert store.put_stream("tenants/a/outputs/j/result.mp4", chunks) == len(payload)
    head = store.client.head_object(
        Bucket=store.options.bucket, Key="tenants/a/outputs/j/result.mp4"
    )
    assert head["ETag"].strip('"').endswith("-3")  # 5 + 5 + 1 MiB: a three-part upload
    assert store.get("tenants/a/outputs/j/result.mp4") == payload
    store.put("tenants/a/outputs/j/small", b"tiny")
    head = store.client.head_object(Bucket=store.options.bucket, Key="tenants/a/outputs/j/small")
    assert "-" not in head["ETag"]  # below the threshold: one plain PUT


def test_presigned_url_downloads_with_plain_http(make_s3_store: S3Factory) -> None:
    store = make_s3_store(presign_seconds=60)
    store.put("tenants/a/outputs/j/result.png", b"\x89PNG result")
    url = store.presigned_url("tenants/a/outputs/j/result.png")
    assert "X-Amz-Expires=60" in url
    assert httpx.get(url).content == b"\x89PNG result"
    # moto does not check signatures or expiry, so what the URL grants is asserted on its
    # signed parameters: SigV4 over this one key, for 60 seconds.
    assert "X-Amz-Signature=" in url
    assert "/tenants/a/outputs/j/result.png?" in url
    with pytest.raises(InvalidKey):
        store.presigned_url("../etc/passwd")


def test_tenant_buckets_are_separate(make_s3_store: S3Factory, tmp_path: Path) -> None:
    prefix = f"fg-{uuid.uuid4().hex[:8]}"
    store = make_s3_store(tenant_bucket=prefix + "-{tenant}")
    tenants = TenantStore(store)
    sessions = create_database(tmp_path)
    with session_scope(sessions) as session:
        for tenant in ("a", "b"):
            create_tenant(session, tenant)
            tenants.put(
                session,
                tenant_id=tenant,
                kind="inputs",
                job_id=JOB,
                name="target",
                data=tenant.encode() * 10,
                content_type="image/png",
            )
    key_a = build_key("a", "inputs", JOB, "target")
    key_b = build_key("b", "inputs", JOB, "target")
    assert store.bucket_for(key_a) == f"{prefix}-a"
    listed_a = store.client.list_objects_v2(Bucket=f"{prefix}-a")["Contents"]
    assert [item["Key"] for item in listed_a] == [key_a]  # b's object is not in a's bucket
    listed_b = store.client.list_objects_v2(Bucket=f"{prefix}-b")["Contents"]
    assert [item["Key"] for item in listed_b] == [key_b]
    assert tenants.get("b", "inputs", JOB, "target") == b"b" * 10
    url = tenants.download_url("b", "inputs", JOB, "target", expires_seconds=30)
    assert url is not None
    assert f"/{prefix}-b/{key_b}?" in url
    assert httpx.get(url).content == b"b" * 10
    assert TenantStore(MemoryStore()).download_url("b", "inputs", JOB, "target") is None
    assert store.list("tenants/b/") == [key_b]
    assert store.list("") == [key_a, key_b]
    # b's keys only ever resolve into b's bucket: no key of b names a's objects
    assert store.bucket_for(key_b) == f"{prefix}-b"
    assert store.list("tenants/c/") == []  # no bucket yet: nothing, not an error


def test_logical_prefixes_keep_tenants_apart(make_s3_store: S3Factory) -> None:
    store = make_s3_store()
    store.put(build_key("a", "inputs", JOB, "target"), b"a")
    store.put(build_key("ab", "inputs", JOB, "target"), b"ab")
    # "tenants/a/" must not match tenant "ab": prefixes end at a whole segment
    assert store.list("tenants/a/") == [build_key("a", "inputs", JOB, "target")]
    assert store.list("tenants/ab/") == [build_key("ab", "inputs", JOB, "target")]


def test_missing_objects_and_buckets(make_s3_store: S3Factory) -> None:
    store = make_s3_store()
    with pytest.raises(ObjectNotFound):
        store.get("tenants/a/inputs/j/target")  # the bucket does not even exist yet
    store.put("tenants/a/inputs/j/other", b"x")
    with pytest.raises(ObjectNotFound):
        store.get("tenants/a/inputs/j/target")
    with pytest.raises(ObjectNotFound):
        store.size("tenants/a/inputs/j/target")
    assert not store.delete("tenants/a/inputs/j/target")
    assert store.breaker.state == "closed"  # a 404 is an answer, not an outage


def test_dead_endpoint_opens_the_breaker(make_s3_store: S3Factory) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = make_s3_store(endpoint_url=f"http://127.0.0.1:{port}", timeout_seconds=1.0)
    for _ in range(3):
        with pytest.raises(S3Unavailable) as caught:
            store.get("tenants/a/inputs/j/target")
        assert as_problem(caught.value).status == 503
    with pytest.raises(CircuitOpen) as opened:
        store.put("tenants/a/inputs/j/target", b"x")
    assert opened.value.dependency == "s3"


def test_the_s3_breaker_follows_the_breaker_settings(tmp_path: Path, s3_credentials: None) -> None:
    """The store the service builds from Settings opens its breaker after
    FACEGATE_BREAKER_FAILURE_THRESHOLD failures and refuses for FACEGATE_BREAKER_RESET_SECONDS
    (not the defaults 5 and 10), for the tenant store and the model store alike."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = make_settings(
        tmp_path,
        storage_url=f"s3://dead?endpoint_url=http://127.0.0.1:{port}&timeout_seconds=1",
        models_in_storage=True,
        breaker_failure_threshold=2,
        breaker_reset_seconds=120,
    )
    store = tenant_store_for(settings).store
    assert isinstance(store, S3Store)
    assert store.breaker.config == BreakerConfig(2, 120.0)
    for _ in range(2):
        with pytest.raises(S3Unavailable):
            store.get("tenants/a/inputs/j/target")
    with pytest.raises(CircuitOpen) as refused:
        store.get("tenants/a/inputs/j/target")
    assert 110 <= refused.value.extra["retry_after"] <= 120
    remote = installation_model_store(settings).remote
    assert isinstance(remote, ObjectStorageModels)
    assert remote.objects is store  # one store, one breaker


def test_storage_url_options(moto_endpoint: str, s3_credentials: None) -> None:
    url = f"s3://media?endpoint_url={moto_endpoint}&region=eu-west-1&tenant_bucket=media-{{tenant}}"
    store = store_from_url(url, BreakerConfig())
    assert isinstance(store, S3Store)
    assert store.options == S3Options(
        bucket="media",
        endpoint_url=moto_endpoint,
        region="eu-west-1",
        tenant_bucket="media-{tenant}",
    )
    store.put("tenants/zed/inputs/j/target", b"eu")  # creates media-zed in eu-west-1
    location = store.client.get_bucket_location(Bucket="media-zed")["LocationConstraint"]
    assert location == "eu-west-1"
    for bad in ("s3://", "s3://UPPER", "s3://b?colour=red", "s3://b?tenant_bucket=x_{tenant}"):
        with pytest.raises(StorageError):
            store_from_url(bad, BreakerConfig())

"""TenantStore: keys only from validated parts, per-tenant quota, retention purge."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from storagefactories import create_database, create_tenant

from facegate.database import session_scope, utcnow
from facegate.storage.base import CHUNK_SIZE, InvalidKey, StorageQuotaExceeded
from facegate.storage.local import LocalStore
from facegate.storage.memory import MemoryStore
from facegate.storage.tables import StoredObject
from facegate.storage.tenant import TenantStore, build_key

JOB = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_key_layout() -> None:
    assert build_key("acme", "inputs", JOB, "target") == f"tenants/acme/inputs/{JOB}/target"
    assert build_key("acme", "outputs", str(JOB), "result.png").endswith("/result.png")


@pytest.mark.parametrize(
    ("tenant", "kind", "job", "name"),
    [
        ("../acme", "inputs", JOB, "target"),
        ("Acme", "inputs", JOB, "target"),
        ("acme/b", "inputs", JOB, "target"),
        ("acme", "secrets", JOB, "target"),
        ("acme", "inputs", "not-a-uuid", "target"),
        ("acme", "inputs", "../../x", "target"),
        ("acme", "inputs", JOB, "../../../etc/passwd"),
        ("acme", "inputs", JOB, "photo of me.jpg"),
        ("acme", "inputs", JOB, "source-99"),
        ("acme", "inputs", JOB, "result.exe"),
    ],
)
def test_user_input_never_becomes_a_path(tenant: str, kind: str, job: object, name: str) -> None:
    with pytest.raises(InvalidKey):
        build_key(tenant, kind, job, name)  # type: ignore[arg-type]


def test_quota_counts_bytes_per_tenant(tmp_path: Path) -> None:
    sessions = create_database(tmp_path)
    store = TenantStore(LocalStore(tmp_path / "objects"))
    with session_scope(sessions) as session:
        create_tenant(session, "a")
        create_tenant(session, "b")
        store.put(
            session,
            tenant_id="a",
            kind="inputs",
            job_id=JOB,
            name="target",
            data=b"x" * 60,
            content_type="image/png",
            quota_bytes=100,
        )
        # rewriting the same key replaces its bytes instead of adding them
        store.put(
            session,
            tenant_id="a",
            kind="inputs",
            job_id=JOB,
            name="target",
            data=b"x" * 90,
            content_type="image/png",
            quota_bytes=100,
        )
        assert store.usage_bytes(session, "a") == 90
        with pytest.raises(StorageQuotaExceeded) as caught:
            store.put(
                session,
                tenant_id="a",
                kind="inputs",
                job_id=JOB,
                name="source-0",
                data=b"y" * 11,
                content_type="image/png",
                quota_bytes=100,
            )
        assert caught.value.quota_bytes == 100
        assert caught.value.used_bytes == 90
        # nothing was written for the refused object
        assert not store.store.exists(build_key("a", "inputs", JOB, "source-0"))
        # tenant b's quota is its own
        store.put(
            session,
            tenant_id="b",
            kind="inputs",
            job_id=JOB,
            name="target",
            data=b"z" * 100,
            content_type="image/png",
            quota_bytes=100,
        )
        assert store.usage_bytes(session, "b") == 100
        assert store.find(session, "b", "inputs", JOB, "target") is not None
        assert store.get("a", "inputs", JOB, "target") == b"x" * 90
        assert store.get("b", "inputs", JOB, "target") == b"z" * 100


def test_a_file_is_streamed_in_and_counts_against_the_quota(tmp_path: Path) -> None:
    # A video result is stored from its file in chunks, never read into memory whole.
    sessions = create_database(tmp_path)
    store = TenantStore(LocalStore(tmp_path / "objects"))
    payload = bytes(range(256)) * (3 * CHUNK_SIZE // 256 + 7)  # several chunks and a bit
    result = tmp_path / "result.mp4"
    result.write_bytes(payload)
    with session_scope(sessions) as session:
        create_tenant(session, "a")
        ref = store.put(
            session,
            tenant_id="a",
            kind="outputs",
            job_id=JOB,
            name="result.mp4",
            data=result,
            content_type="video/mp4",
            quota_bytes=len(payload) + 10,
        )
        assert ref.size_bytes == len(payload)
        assert store.usage_bytes(session, "a") == len(payload)
        assert b"".join(store.iter_chunks("a", "outputs", JOB, "result.mp4")) == payload
        eleven = tmp_path / "eleven"
        eleven.write_bytes(b"y" * 11)
        with pytest.raises(StorageQuotaExceeded) as caught:
            store.put(
                session,
                tenant_id="a",
                kind="outputs",
                job_id=JOB,
                name="preview.jpg",
                data=eleven,
                content_type="image/jpeg",
                quota_bytes=len(payload) + 10,
            )
        assert caught.value.requested_bytes == 11
        assert not store.store.exists(build_key("a", "outputs", JOB, "preview.jpg"))


def test_purge_expired_follows_each_tenants_retention(tmp_path: Path) -> None:
    sessions = create_database(tmp_path)
    store = TenantStore(MemoryStore())
    now = utcnow()
    with session_scope(sessions) as session:
        create_tenant(session, "short", retention_days=1)
        create_tenant(session, "long", retention_days=30)
        for tenant in ("short", "long"):
            for name, age in (("target", 3), ("source-0", 0)):
                ref = store.put(
                    session,
                    tenant_id=tenant,
                    kind="inputs",
                    job_id=JOB,
                    name=name,
                    data=b"data",
                    content_type="image/png",
                )
                session.get_one(StoredObject, ref.key).created_at = now - timedelta(days=age)
    with session_scope(sessions) as session:
        purged = store.purge_expired(session, now, {"short": 1, "long": 30})
    assert purged == 1
    assert store.store.list("") == [
        f"tenants/long/inputs/{JOB}/source-0",
        f"tenants/long/inputs/{JOB}/target",
        f"tenants/short/inputs/{JOB}/source-0",
    ]
    with session_scope(sessions) as session:
        assert store.usage_bytes(session, "short") == 4
        assert store.find(session, "short", "inputs", JOB, "target") is None


def test_delete_job_removes_objects_and_ledger(tmp_path: Path) -> None:
    sessions = create_database(tmp_path)
    store = TenantStore(MemoryStore())
    with session_scope(sessions) as session:
        create_tenant(session, "a")
        store.put(
            session,
            tenant_id="a",
            kind="outputs",
            job_id=JOB,
            name="result.png",
            data=b"png",
            content_type="image/png",
        )
        assert store.delete_job(session, "b", JOB) == 0  # another tenant's id: nothing
        assert store.delete_job(session, "a", JOB) == 1
        assert store.usage_bytes(session, "a") == 0
    assert store.store.list("") == []

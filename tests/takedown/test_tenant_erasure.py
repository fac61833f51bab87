"""Tenant offboarding: export, then erase through the admin route (SQLite and PostgreSQL,
local files and S3 through moto, Redis when CI runs one) and the CLI. Afterwards nothing of
the tenant is left in storage, the database or Redis, its keys no longer authenticate, the
signed receipt verifies, the audit chain verifies, and another tenant's data is unchanged
byte for byte."""

from __future__ import annotations

import io
import json
import os
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.conftest import MakeClient
from tests.dbkit import create_schema, drop_schema, postgres_url
from tests.motokit import moto_server
from tests.ratelimit.ratelimitfactories import unique_prefix
from tests.takedown.takedownkit import fingerprint, populate

from facegate.cli import main
from facegate.database import session_scope
from facegate.jobs.runtime import tenant_store_for
from facegate.observability.audit.chain import verify_chain
from facegate.observability.audit.repository import AuditRepository
from facegate.provenance.keys import create_keys, load_keys
from facegate.provenance.receipts import ReceiptInvalid, verify_statement
from facegate.takedown.erasure import KEPT, audit_anchor_holds
from facegate.takedown.runtime import redis_keys_for
from facegate.tenancy.repository import TenancyRepository


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "facegate-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "facegate-test-secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def redis_url() -> str | None:
    return "redis://127.0.0.1:6379/0" if os.environ.get("CI") == "true" else None


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/facegate.db"
        return
    base = postgres_url()
    if base is None:
        pytest.skip("set CI=true to run the PostgreSQL erasure test")
    schema, url = create_schema(base, "erase")
    yield url
    drop_schema(base, schema)


@pytest.fixture(params=["local", "s3"])
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return f"file://{tmp_path}/storage"
    endpoint = request.getfixturevalue("moto_endpoint")
    request.getfixturevalue("s3_credentials")
    return f"s3://fg-{uuid.uuid4().hex[:12]}?endpoint_url={endpoint}&presign_seconds=60"


async def test_erase_leaves_nothing_and_touches_no_other_tenant(
    make_client: MakeClient, tmp_path: Path, database_url: str, storage_url: str
) -> None:
    create_keys(tmp_path / "provenance")
    overrides: dict[str, Any] = {
        "database_url": database_url,
        "storage_url": storage_url,
        "provenance_dir": tmp_path / "provenance",
    }
    if redis_url() is not None:
        overrides |= {
            "redis_url": redis_url(),
            "rate_limit_enabled": True,
            "rate_limit_key_prefix": unique_prefix(),
        }
    async with make_client(**overrides) as h:
        settings = h.state.settings
        admin = h.headers("platform", ["admin"])
        acme = h.headers("acme", ["jobs:read", "jobs:write", "tenant:admin"])
        other = h.headers("other", ["jobs:read"])
        store = tenant_store_for(settings)
        with session_scope(h.state.session_factory) as session:
            made = populate(session, store, "acme")
            populate(session, store, "other")
        # Requests of both tenants: their rate-limit counters exist (in Redis on CI).
        assert (await h.client.get("/v1/jobs", headers=acme)).status_code == 200
        assert (await h.client.get("/v1/jobs", headers=other)).status_code == 200
        redis = redis_keys_for(settings)
        if redis is not None:
            assert redis.find("acme")
            assert redis.find("other")
        with session_scope(h.state.session_factory, read_only=True) as session:
            before = fingerprint(session, store.store, "other", redis)
        assert sum(key.startswith("object:") for key in before) == 11

        exported = await h.client.get("/v1/admin/tenants/acme/export", headers=admin)
        assert exported.status_code == 200, exported.text
        archive = zipfile.ZipFile(io.BytesIO(exported.content))
        manifest = json.loads(archive.read("facegate-export.json"))
        assert manifest["format"] == "facegate.tenant-export/1"
        names = set(archive.namelist())
        for table in (
            "jobs",
            "batches",
            "batch_items",
            "library_faces",
            "job_templates",
            "usage_records",
            "audit_events",
            "policies",
            "webhook_endpoints",
        ):
            assert f"rows/{table}.jsonl" in names
        job_lines = archive.read("rows/jobs.jsonl").decode().splitlines()
        assert {json.loads(line)["id"] for line in job_lines} == {str(j) for j in made["jobs"]}
        assert b"whsec_" not in archive.read("rows/webhook_endpoints.jsonl")
        assert "embedding" not in json.loads(archive.read("rows/library_faces.jsonl"))
        objects = [name for name in names if name.startswith("objects/")]
        assert len(objects) == 11
        assert archive.read(f"objects/outputs/{made['jobs'][0]}/result.jpg") == b"result bytes"
        for name, entry in manifest["files"].items():
            import hashlib

            assert hashlib.sha256(archive.read(name)).hexdigest() == entry["sha256"]

        refused = await h.client.post(
            "/v1/admin/tenants/acme/erase", json={"confirm": "acm"}, headers=admin
        )
        assert refused.status_code == 422
        response = await h.client.post(
            "/v1/admin/tenants/acme/erase", json={"confirm": "acme"}, headers=admin
        )
        assert response.status_code == 200, response.text
        receipt = response.json()
        statement = receipt["statement"]
        assert statement["scan"]["empty"] is True
        assert statement["scan"]["objects_left"] == 0
        assert statement["deleted"]["objects"] == {"faces": 2, "inputs": 6, "outputs": 3}
        rows = statement["deleted"]["rows"]
        assert rows["jobs"] == 3
        assert rows["api_keys"] == 1
        assert rows["webhook_endpoints"] == 1
        assert rows["library_faces"] == 1
        assert rows["job_templates"] == 1
        assert rows["batches"] == 1
        assert set(statement["kept"]) == set(KEPT)
        assert statement["kept"]["usage_records"]["rows"] == 3
        if redis is not None:
            assert statement["deleted"]["redis_keys"] >= 1
            assert statement["scan"]["redis_keys_left"] == 0
            assert redis.find("acme") == []

        # Its keys no longer authenticate; the other tenant's still do.
        assert (await h.client.get("/v1/jobs", headers=acme)).status_code == 401
        again = await h.client.post(
            "/v1/admin/tenants/acme/erase", json={"confirm": "acme"}, headers=admin
        )
        assert again.status_code == 409
        assert store.store.list("tenants/acme/") == []
        with session_scope(h.state.session_factory, read_only=True) as session:
            after = fingerprint(session, store.store, "other", redis)
            tombstone = TenancyRepository(session).get_tenant("acme")
            assert tombstone is not None
            assert tombstone.status == "erased"
            assert tombstone.erased_at is not None
            assert tombstone.policy is None
            assert audit_anchor_holds(session, statement)
            repository = AuditRepository(session)
            assert verify_chain(repository.scan(), repository.head()).ok
        assert after == before
        assert (await h.client.get("/v1/jobs", headers=other)).status_code == 200

        keys = load_keys(tmp_path / "provenance")
        from datetime import datetime

        made_at = datetime.fromisoformat(statement["erased_at"])
        assert verify_statement(keys.ca_pem, receipt, at=made_at) == statement
        forged = json.loads(json.dumps(receipt))
        forged["statement"]["scan"]["objects_left"] = 0
        forged["statement"]["deleted"]["objects"]["inputs"] = 5
        with pytest.raises(ReceiptInvalid):
            verify_statement(keys.ca_pem, forged, at=made_at)
        stranger = tmp_path / "stranger"
        create_keys(stranger)
        with pytest.raises(ReceiptInvalid):
            verify_statement(load_keys(stranger).ca_pem, receipt, at=made_at)


def test_cli_exports_then_erases_and_verifies_the_receipt(tmp_path: Path) -> None:
    env = {
        "FACEGATE_DATABASE_URL": f"sqlite:///{tmp_path}/facegate.db",
        "FACEGATE_STORAGE_URL": f"file://{tmp_path}/storage",
        "FACEGATE_PROVENANCE_DIR": str(tmp_path / "provenance"),
        "FACEGATE_DATA_DIR": str(tmp_path),
    }
    runner = CliRunner()

    def cli(*args: str, code: int = 0, stdin: str | None = None) -> str:
        result = runner.invoke(main, list(args), env=env, input=stdin, catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    cli("provenance", "init", "--dir", str(tmp_path / "provenance"))
    (tmp_path / "t.yaml").write_text("id: acme\n---\nid: other\n")
    cli("tenant", "apply", "-f", str(tmp_path / "t.yaml"))
    cli("key", "create", "acme", "--scope", "jobs:read")
    from facegate.database import create_engine_from_url, create_session_factory
    from facegate.storage.local import LocalStore
    from facegate.storage.tenant import TenantStore

    engine = create_engine_from_url(env["FACEGATE_DATABASE_URL"])
    store = TenantStore(LocalStore(tmp_path / "storage"))
    with session_scope(create_session_factory(engine)) as session:
        populate(session, store, "acme")
    engine.dispose()
    archive = tmp_path / "acme.zip"
    assert "exported" in cli("tenant", "export", "acme", "-o", str(archive))
    assert "rows/jobs.jsonl" in zipfile.ZipFile(archive).namelist()
    cli("tenant", "erase", "acme", code=1, stdin="n\n")  # asked first: no
    assert (tmp_path / "storage" / "tenants" / "acme").exists()
    receipt = tmp_path / "receipt.json"
    cli("tenant", "erase", "acme", "--yes", "-o", str(receipt))
    assert "ok: tenant erasure of acme" in cli("receipt", "verify", str(receipt))
    document = json.loads(receipt.read_text())
    document["statement"]["deleted"]["rows"]["jobs"] = 0
    (tmp_path / "forged.json").write_text(json.dumps(document))
    assert "invalid receipt" in cli("receipt", "verify", str(tmp_path / "forged.json"), code=1)
    assert cli("audit", "verify").startswith("ok:")
    assert "erased" in cli("tenant", "list")
    assert "erased" in cli("tenant", "apply", "-f", str(tmp_path / "t.yaml"), code=1)

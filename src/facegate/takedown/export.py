"""A tenant's data as one ZIP archive (``facegate tenant export``, ``GET
/v1/admin/tenants/<id>/export``), the format docs/takedown.md describes:

- ``facegate-export.json``: format, tenant, when, the installation, and each file's SHA-256
  and size (rows: how many lines);
- ``tenant.json``: the tenant and its policy;
- ``rows/<table>.jsonl``: one JSON object per row of each table that holds the tenant's data
  (jobs, batches and items, saved faces, templates, usage, audit events, consent
  attestations, keys, webhook endpoints and deliveries, the storage ledger), columns as
  named in the database; secrets (key hashes, webhook secrets) and face descriptors are
  left out;
- ``objects/<kind>/<id>/<name>``: every stored object of the tenant (inputs, results,
  previews, saved faces), byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import uuid
import zipfile
from datetime import datetime
from typing import IO, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.errors import NotFound
from facegate.provenance.keys import InstallationKeys
from facegate.storage.base import ObjectNotFound, ObjectStore
from facegate.takedown.erasure import prefix_of, tenant_tables
from facegate.tenancy.repository import TenancyRepository
from facegate.tenancy.schemas import TenantOut

EXPORT_FORMAT = "facegate.tenant-export/1"
#: Tables not exported: the platform's trust-and-safety records, not the tenant's data.
NOT_EXPORTED = frozenset(
    {
        "provenance_marks",
        "takedown_cases",
        "takedown_matches",
        "takedown_removals",
        "takedown_blocks",
        "webhook_events",
    }
)
#: Columns never exported: secrets and biometric descriptors.
WITHHELD: dict[str, frozenset[str]] = {
    "api_keys": frozenset({"secret_hash"}),
    "webhook_endpoints": frozenset({"secret", "previous_secret"}),
    "library_faces": frozenset({"embedding"}),
}


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return None
    return value


def export_tenant(
    session: Session, store: ObjectStore, keys: InstallationKeys, tenant_id: str, out: IO[bytes]
) -> dict[str, Any]:
    """Write the archive to ``out`` (a seekable binary file); returns its manifest."""
    tenant = TenancyRepository(session).get_tenant(tenant_id)
    if tenant is None or tenant.is_erased:
        raise NotFound(f"tenant {tenant_id!r} does not exist (or was erased)")
    files: dict[str, dict[str, Any]] = {}
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:

        def add(name: str, data: bytes, **extra: Any) -> None:
            archive.writestr(name, data)
            files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), **extra}

        add("tenant.json", TenantOut.model_validate(tenant).model_dump_json(indent=2).encode())
        for table in sorted(tenant_tables(), key=lambda t: t.name):
            if table.name in NOT_EXPORTED:
                continue
            hidden = WITHHELD.get(table.name, frozenset())
            columns = [c for c in table.columns if c.name not in hidden]
            stmt = select(*columns).where(table.c.tenant_id == tenant_id)
            lines = [
                json.dumps({k: _jsonable(v) for k, v in row._mapping.items()}, sort_keys=True)
                for row in session.execute(stmt.order_by(*table.primary_key.columns))
            ]
            body = ("\n".join(lines) + "\n" if lines else "").encode()
            add(f"rows/{table.name}.jsonl", body, rows=len(lines))
        prefix = prefix_of(tenant_id)
        for key in store.list(prefix):
            try:
                data = store.get(key)
            except ObjectNotFound:
                continue  # deleted (retention) while the archive was written
            add(f"objects/{key[len(prefix) :]}", data)
        manifest = {
            "format": EXPORT_FORMAT,
            "tenant_id": tenant_id,
            "exported_at": utcnow().isoformat(),
            "installation_id": f"{keys.installation_id:04x}",
            "files": files,
        }
        archive.writestr("facegate-export.json", json.dumps(manifest, indent=2, sort_keys=True))
    return manifest

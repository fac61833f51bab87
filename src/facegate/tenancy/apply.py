"""Declarative tenants: ``facegate tenant apply -f tenants.yaml`` (like ``kubectl apply``).

The file holds one tenant document, a list of them, or ``{"tenants": [...]}``; YAML or JSON
(JSON is YAML). Each document is a :class:`TenantSpec`, so the specification's own format
(``tenant_id`` / ``quota`` / ``storage_path``) is accepted as is. Tenants absent from the
file are left alone (no pruning: deleting a customer is never a side effect of an edit).

``--watch`` re-applies when the file changes. A Kubernetes ConfigMap volume updates by
swapping a ``..data`` symlink, so the file's inode never changes and inotify on the file
misses it; we therefore poll the *resolved* content (path, mtime, size and a hash), which
sees both ordinary edits and symlink swaps.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from facegate.database import SessionFactory, session_scope
from facegate.errors import Conflict
from facegate.tenancy.audited import apply_tenant
from facegate.tenancy.schemas import TenantSpec
from facegate.tenancy.service import ApplyOutcome


class ApplyError(Exception):
    """The file cannot be read or one of its documents is invalid (nothing was applied)."""


@dataclass(frozen=True)
class AppliedTenant:
    tenant_id: str
    outcome: ApplyOutcome


def _documents(raw: Any) -> list[Any]:
    if raw is None:
        return []
    if isinstance(raw, dict) and "tenants" in raw:
        raw = raw["tenants"]
    return list(raw) if isinstance(raw, list) else [raw]


def load_specs(text: str) -> list[TenantSpec]:
    """All tenant documents in ``text`` (multi-document YAML allowed), validated."""
    try:
        raw_documents = [doc for part in yaml.safe_load_all(text) for doc in _documents(part)]
    except yaml.YAMLError as exc:
        raise ApplyError(f"not valid YAML: {exc}") from exc
    specs: list[TenantSpec] = []
    for index, document in enumerate(raw_documents):
        try:
            specs.append(TenantSpec.model_validate(document))
        except ValidationError as exc:
            raise ApplyError(f"tenant document #{index + 1} is invalid:\n{exc}") from exc
    ids = [spec.id for spec in specs]
    duplicates = sorted({tenant_id for tenant_id in ids if ids.count(tenant_id) > 1})
    if duplicates:
        raise ApplyError(f"tenants declared twice: {duplicates}")
    return specs


def apply_specs(
    factory: SessionFactory, specs: list[TenantSpec], actor: str
) -> list[AppliedTenant]:
    """Apply all specs in one transaction: either the whole file takes effect or none, each
    change audited with ``actor`` (see ``tenancy.audited.apply_tenant``)."""
    try:
        with session_scope(factory) as session:
            return [AppliedTenant(spec.id, apply_tenant(session, actor, spec)) for spec in specs]
    except Conflict as exc:  # an erased tenant's id: the file cannot take effect
        raise ApplyError(exc.detail) from exc


def apply_file(factory: SessionFactory, path: Path, actor: str) -> list[AppliedTenant]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ApplyError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return apply_specs(factory, load_specs(text), actor)


def file_fingerprint(path: Path) -> str | None:
    """Changes whenever the content behind ``path`` changes, symlink swaps included."""
    try:
        return hashlib.sha256(path.resolve().read_bytes()).hexdigest()
    except OSError:
        return None  # mid-swap or deleted: wait for the next poll


def watch_changes(
    path: Path,
    *,
    interval: float = 2.0,
    should_stop: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[str]:
    """Yield once at start and again each time the file's content changes."""
    last: str | None = None
    while not should_stop():
        current = file_fingerprint(path)
        if current is not None and current != last:
            last = current
            yield current
        sleep(interval)

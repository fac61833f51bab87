"""The model store: ``<models_dir>/<name>/<tag>/<files + manifest>``, with tenant-private models
under ``<models_dir>/tenants/<tenant>/<name>/<tag>/``, plus the built-ins shipped in packages.

Every file is checked against its manifest sha256 before its first load (then cached by
path, size and mtime). A tenant sees the shared models and its own; a private model of the
same name shadows the shared one for that tenant only. Nothing is ever downloaded.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facegate.engine.errors import ModelUnavailable
from facegate.engine.models.builtins import builtin_models
from facegate.engine.models.manifest import (
    MODEL_KINDS,
    ModelFile,
    ModelVersion,
    check_safe_name,
    read_manifest,
    write_manifest,
)
from facegate.engine.models.tags import TagPolicy

TENANTS_DIR = "tenants"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tag_sort_key(tag: str) -> tuple[Any, ...]:
    """Natural order, so v10 sorts after v9 and 'builtin' sorts before any version."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", tag))


class ModelStore:
    """Name/tag -> verified model files, for the shared installation and each tenant."""

    def __init__(self, root: Path, *, include_builtins: bool = True) -> None:
        self.root = Path(root)
        self._builtins = {m.name: m for m in builtin_models()} if include_builtins else {}
        self._verified: dict[tuple[str, int, int], str] = {}
        self._lock = threading.Lock()

    # -- discovery -------------------------------------------------------------------------
    def _base(self, tenant: str | None) -> Path:
        if tenant is None:
            return self.root
        return self.root / TENANTS_DIR / check_safe_name(tenant, "tenant id")

    def _versions_in(self, base: Path, tenant: str | None) -> list[ModelVersion]:
        found: list[ModelVersion] = []
        if not base.is_dir():
            return found
        for name_dir in sorted(base.iterdir()):
            if not name_dir.is_dir() or (tenant is None and name_dir.name == TENANTS_DIR):
                continue
            for tag_dir in sorted(name_dir.iterdir(), key=lambda p: tag_sort_key(p.name)):
                if tag_dir.is_dir() and not tag_dir.name.startswith("."):
                    try:
                        found.append(read_manifest(tag_dir, tenant=tenant))
                    except ModelUnavailable:
                        continue  # `facegate models verify` reports broken versions
        return found

    def list_models(self, tenant: str | None = None) -> list[ModelVersion]:
        """Models visible to ``tenant`` (None: the shared ones): built-in, shared, private."""
        shared = list(self._builtins.values()) + self._versions_in(self.root, None)
        if tenant is None:
            return shared
        return shared + self._versions_in(self._base(tenant), tenant)

    def tags(self, name: str, tenant: str | None = None) -> list[str]:
        """Installed tags of ``name`` visible to ``tenant``, oldest first."""
        return [v.tag for v in self._candidates(name, tenant)]

    def _candidates(self, name: str, tenant: str | None) -> list[ModelVersion]:
        check_safe_name(name, "model name")
        if tenant is not None:
            private = self._versions_of(self._base(tenant) / name, tenant)
            if private:
                return private  # a tenant's own model shadows the shared one of that name
        shared = self._versions_of(self.root / name, None) if name != TENANTS_DIR else []
        if name in self._builtins:
            shared.insert(0, self._builtins[name])
        return shared

    def _versions_of(self, name_dir: Path, tenant: str | None) -> list[ModelVersion]:
        if not name_dir.is_dir():
            return []
        dirs = sorted(
            # dot-dirs are additions or removals in progress, never a version
            (p for p in name_dir.iterdir() if p.is_dir() and not p.name.startswith(".")),
            key=lambda p: tag_sort_key(p.name),
        )
        return [read_manifest(d, tenant=tenant) for d in dirs]

    # -- resolution ------------------------------------------------------------------------
    def resolve(
        self,
        name: str,
        *,
        tenant: str | None = None,
        tag: str | None = None,
        policy: TagPolicy | None = None,
        job_id: str | None = None,
    ) -> ModelVersion:
        """The version to use: explicit tag, else the policy's choice, else the newest."""
        versions = self._candidates(name, tenant)
        if not versions:
            raise ModelUnavailable(f"model {name!r} is not installed")
        installed = [v.tag for v in versions]
        wanted = tag or (policy.choose(name, job_id, installed) if policy else None)
        if wanted is None:
            return versions[-1]
        for version in versions:
            if version.tag == wanted:
                return version
        raise ModelUnavailable(
            f"model {name!r} has no tag {wanted!r} (installed: {', '.join(installed)})"
        )

    def verified_path(self, version: ModelVersion, role: str = "model") -> Path:
        """The file's path once its sha256 matches the manifest (checked once per file state)."""
        item = version.file(role)
        self.verify_file(item, f"{version.name}:{version.tag}")
        return item.path

    def verify(self, version: ModelVersion) -> None:
        for item in version.files:
            self.verify_file(item, f"{version.name}:{version.tag}")

    def verify_file(self, item: ModelFile, label: str) -> None:
        try:
            stat = item.path.stat()
        except OSError:
            raise ModelUnavailable(f"model {label}: file {item.path.name} is missing") from None
        key = (str(item.path), stat.st_size, stat.st_mtime_ns)
        with self._lock:
            known = self._verified.get(key)
        if known is None:
            known = sha256_file(item.path)
            with self._lock:
                self._verified[key] = known
        if known != item.sha256:
            raise ModelUnavailable(
                f"model {label}: sha256 mismatch for {item.path.name} "
                f"(manifest {item.sha256[:12]}…, file {known[:12]}…); refusing to load it"
            )

    # -- installation ----------------------------------------------------------------------
    def add(
        self,
        name: str,
        tag: str,
        files: Mapping[str, Path],
        *,
        kind: str,
        licence: str,
        tenant: str | None = None,
        input_spec: Mapping[str, Any] | None = None,
    ) -> ModelVersion:
        """Copy ``files`` (role -> path) in as ``name:tag`` with a fresh manifest."""
        check_safe_name(name, "model name")
        check_safe_name(tag, "tag")
        if kind not in MODEL_KINDS:
            raise ModelUnavailable(
                f"unknown kind {kind!r} (known: {', '.join(sorted(MODEL_KINDS))})"
            )
        if tenant is None and name == TENANTS_DIR:
            raise ModelUnavailable(f"{TENANTS_DIR!r} is reserved")
        target = self._base(tenant) / name / tag
        if target.exists():
            raise ModelUnavailable(f"model {name}:{tag} already exists; use a new tag")
        staging = target.with_name(f".{tag}.partial-{os.getpid()}")
        staging.mkdir(parents=True)
        try:
            entries = []
            for role, src in files.items():
                dest = staging / check_safe_name(Path(src).name, "file name")
                shutil.copyfile(src, dest)
                entries.append(ModelFile(role, target / dest.name, sha256_file(dest)))
            version = ModelVersion(
                name, tag, kind, licence, tuple(entries), dict(input_spec or {}), tenant
            )
            write_manifest(version, staging)
            staging.rename(target)  # appears complete or not at all
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return version

    def remove(self, name: str, tag: str, *, tenant: str) -> None:
        """Delete a tenant's private ``name:tag`` (shared models are removed by operators on
        disk); ModelUnavailable when it does not exist. Running jobs keep their session."""
        target = (
            self._base(tenant) / check_safe_name(name, "model name") / check_safe_name(tag, "tag")
        )
        if not target.is_dir():
            raise ModelUnavailable(f"model {name}:{tag} is not installed")
        # Rename first, so a concurrent resolve sees the version either complete or gone.
        doomed = target.with_name(f".{tag}.deleting-{os.getpid()}-{threading.get_ident()}")
        target.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        try:
            target.parent.rmdir()  # the last tag of this name
        except OSError:
            pass

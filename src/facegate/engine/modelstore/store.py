"""The model store: ``<models_dir>/<name>/<tag>/<files + manifest>``, with tenant-private models
under ``<models_dir>/tenants/<tenant>/<name>/<tag>/``, plus the built-ins shipped in packages.

Every file is checked against its manifest sha256 before its first load (then cached by
path, size and mtime). A tenant sees the shared models and its own; a private model of the
same name shadows the shared one for that tenant only. Nothing is ever downloaded.

With a ``RemoteModels`` (the cluster shape: ``storage/remote_models.py``) the versions are
those kept in the installation's object storage and the folder is only a cache of their
files, fetched on first use and checked against the manifest like any local file.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.builtins import builtin_models
from facegate.engine.modelstore.manifest import (
    MODEL_KINDS,
    ModelFile,
    ModelVersion,
    check_safe_name,
    read_manifest,
    write_manifest,
)
from facegate.engine.modelstore.tags import TagPolicy

TENANTS_DIR = "tenants"


class RemoteModels(Protocol):
    """Where the versions live when the local folder is only a cache of their files."""

    def versions(
        self, store: ModelStore, tenant: str | None, name: str | None, *, fresh: bool = False
    ) -> list[ModelVersion]:
        """Stored versions of ``tenant`` (None: shared), of ``name`` or every name, with
        file paths in ``store``'s cache; ``fresh`` skips any cached listing."""
        ...

    def fetch(self, version: ModelVersion, item: ModelFile) -> None:
        """Put ``item``'s bytes at ``item.path``."""
        ...

    def publish(self, version: ModelVersion, folder: Path) -> None:
        """Store a version whose files and manifest are in ``folder``."""
        ...

    def withdraw(self, name: str, tag: str, tenant: str | None) -> bool:
        """Delete a stored version; False when there was none."""
        ...


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

    def __init__(
        self, root: Path, *, include_builtins: bool = True, remote: RemoteModels | None = None
    ) -> None:
        self.root = Path(root)
        self.remote = remote
        self._builtins = {m.name: m for m in builtin_models()} if include_builtins else {}
        self._verified: dict[tuple[str, int, int], str] = {}
        self._lock = threading.Lock()

    # -- discovery -------------------------------------------------------------------------
    def _base(self, tenant: str | None) -> Path:
        if tenant is None:
            return self.root
        return self.root / TENANTS_DIR / check_safe_name(tenant, "tenant id")

    def name_dir(self, name: str, tenant: str | None = None) -> Path:
        """Where the versions of ``name`` of ``tenant`` (None: shared) live locally."""
        return self._base(tenant) / check_safe_name(name, "model name")

    def version_dir(self, name: str, tag: str, tenant: str | None = None) -> Path:
        """Where ``name:tag`` of ``tenant`` lives in the local folder."""
        return self.name_dir(name, tenant) / check_safe_name(tag, "tag")

    def _versions_in(self, base: Path, tenant: str | None) -> list[ModelVersion]:
        if self.remote is not None:
            return self._sorted(self.remote.versions(self, tenant, None))
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

    def _candidates(
        self, name: str, tenant: str | None, *, fresh: bool = False
    ) -> list[ModelVersion]:
        check_safe_name(name, "model name")
        if tenant is not None:
            private = self._versions_of(self._base(tenant) / name, tenant, fresh=fresh)
            if private:
                return private  # a tenant's own model shadows the shared one of that name
        shared = (
            self._versions_of(self.root / name, None, fresh=fresh) if name != TENANTS_DIR else []
        )
        if name in self._builtins:
            shared.insert(0, self._builtins[name])
        return shared

    def _versions_of(
        self, name_dir: Path, tenant: str | None, *, fresh: bool = False
    ) -> list[ModelVersion]:
        if self.remote is not None:
            return self._sorted(self.remote.versions(self, tenant, name_dir.name, fresh=fresh))
        if not name_dir.is_dir():
            return []
        dirs = sorted(
            # dot-dirs are additions or removals in progress, never a version
            (p for p in name_dir.iterdir() if p.is_dir() and not p.name.startswith(".")),
            key=lambda p: tag_sort_key(p.name),
        )
        return [read_manifest(d, tenant=tenant) for d in dirs]

    @staticmethod
    def _sorted(versions: list[ModelVersion]) -> list[ModelVersion]:
        return sorted(versions, key=lambda v: (v.name, tag_sort_key(v.tag)))

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
        if self.remote is not None and (not versions or (tag and tag not in _tags(versions))):
            versions = self._candidates(name, tenant, fresh=True)  # added elsewhere just now?
        if not versions:
            raise ModelUnavailable(f"model {name!r} is not installed")
        installed = _tags(versions)
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
        self._cache(version, item)
        self.verify_file(item, f"{version.name}:{version.tag}")
        return item.path

    def verify(self, version: ModelVersion) -> None:
        for item in version.files:
            self._cache(version, item)
            self.verify_file(item, f"{version.name}:{version.tag}")

    def _cache(self, version: ModelVersion, item: ModelFile) -> None:
        """With a remote store, fetch a file this process has not used yet."""
        if self.remote is not None and not version.builtin and not item.path.is_file():
            self.remote.fetch(version, item)

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
            if self.remote is not None:
                item.path.unlink(missing_ok=True)  # a bad cached copy is fetched again
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
        if self.remote is not None:
            shutil.rmtree(target, ignore_errors=True)  # only a cache: what is stored decides
            stored = _tags(self.remote.versions(self, tenant, name, fresh=True))
            exists = tag in stored
        else:
            exists = target.exists()
        if exists:
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
            if self.remote is not None:
                # Stored, not cached: the process that runs it fetches it on first use.
                self.remote.publish(version, staging)
                shutil.rmtree(staging, ignore_errors=True)
            else:
                staging.rename(target)  # appears complete or not at all
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return version

    def remove(self, name: str, tag: str, *, tenant: str) -> None:
        """Delete a tenant's private ``name:tag`` (shared models are removed by operators on
        disk); ModelUnavailable when it does not exist. Running jobs keep their session."""
        target = self.version_dir(name, tag, tenant)
        if self.remote is not None:
            if not self.remote.withdraw(name, tag, tenant):
                raise ModelUnavailable(f"model {name}:{tag} is not installed")
            if not target.is_dir():
                return  # never fetched here
        elif not target.is_dir():
            raise ModelUnavailable(f"model {name}:{tag} is not installed")
        # Rename first, so a concurrent resolve sees the version either complete or gone.
        doomed = target.with_name(f".{tag}.deleting-{os.getpid()}-{threading.get_ident()}")
        target.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        try:
            target.parent.rmdir()  # the last tag of this name
        except OSError:
            pass


def _tags(versions: list[ModelVersion]) -> list[str]:
    return [v.tag for v in versions]

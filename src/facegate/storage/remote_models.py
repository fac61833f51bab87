"""The model store kept in the shared object storage (the cluster shape).

In a cluster every API and worker pod has its own ``FACEGATE_MODELS_DIR`` (an ``emptyDir``):
there is no volume they could all read and an operator could fill. With
``FACEGATE_MODELS_IN_STORAGE`` the installation's models live in the object storage every
process already shares, and the local folder is only a cache of the files a process used:

- ``models/<name>/<tag>/<file>``: the shared models (``facegate models add`` as an operator);
- ``tenants/<tenant>/models/<name>/<tag>/<file>``: a tenant's private models (``POST
  /v1/models``), under the tenant's own prefix like everything else it stores.

A version is its ``manifest.json`` (written last, deleted first: a listed manifest means a
complete version). Listing and resolution read manifests only; a file is downloaded the first
time a process needs it, into the cache path the manifest names, and the model store checks
its sha256 against the manifest before anything loads it, as it does for local files. Nothing
comes from outside the installation: the objects were put there by ``add``.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.manifest import ModelFile, ModelVersion, parse_manifest
from facegate.engine.modelstore.store import ModelStore
from facegate.storage.base import (
    TENANT_PATTERN,
    InvalidKey,
    ObjectNotFound,
    ObjectStore,
    StorageError,
    check_key,
    file_chunks,
)

MANIFEST = "manifest.json"
#: How long a listing is trusted before the object storage is asked again: a model uploaded
#: through one API replica is seen by the others within this time (at once where it is
#: asked for by tag).
REFRESH_SECONDS = 10.0


class ObjectStorageModels:
    """The ``RemoteModels`` of a ModelStore whose models live in an ObjectStore."""

    def __init__(
        self,
        objects: ObjectStore,
        *,
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.objects = objects
        self.refresh_seconds = refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        # (tenant, name or None) -> (when listed, the versions found)
        self._listed: dict[tuple[str | None, str | None], tuple[float, list[ModelVersion]]] = {}

    # -- keys ------------------------------------------------------------------------------
    @staticmethod
    def prefix(tenant: str | None) -> str:
        if tenant is None:
            return "models/"
        if not TENANT_PATTERN.fullmatch(tenant):
            raise ModelUnavailable(f"invalid tenant id {tenant!r}")
        return f"tenants/{tenant}/models/"

    def key(self, tenant: str | None, name: str, tag: str, filename: str) -> str:
        try:
            return check_key(f"{self.prefix(tenant)}{name}/{tag}/{filename}")
        except InvalidKey:
            raise ModelUnavailable(
                f"model {name}:{tag}: {filename!r} cannot be kept in the object storage "
                "(letters, digits, '.', '_' and '-'; not starting with '.')"
            ) from None

    # -- reading ---------------------------------------------------------------------------
    def versions(
        self, store: ModelStore, tenant: str | None, name: str | None, *, fresh: bool = False
    ) -> list[ModelVersion]:
        """The versions stored for ``tenant`` (None: shared), of ``name`` or of every name,
        with file paths in ``store``'s local cache."""
        scope = (tenant, name)
        now = self._clock()
        with self._lock:
            cached = self._listed.get(scope)
        if cached is not None and not fresh and now - cached[0] < self.refresh_seconds:
            return list(cached[1])
        found = self._list(store, tenant, name)
        with self._lock:
            self._listed[scope] = (now, found)
        if name is not None:
            self._prune_cache(store, tenant, name, {v.tag for v in found})
        return list(found)

    def _list(self, store: ModelStore, tenant: str | None, name: str | None) -> list[ModelVersion]:
        prefix = self.prefix(tenant) + (f"{name}/" if name else "")
        try:
            keys = self.objects.list(prefix)
        except StorageError as exc:
            raise ModelUnavailable(f"the model store in the object storage: {exc}") from None
        found: list[ModelVersion] = []
        for key in keys:
            parts = key[len(self.prefix(tenant)) :].split("/")
            if len(parts) != 3 or parts[2] != MANIFEST:
                continue
            version = self._read(store, tenant, parts[0], parts[1], key)
            if version is not None:
                found.append(version)
        return found

    def _read(
        self, store: ModelStore, tenant: str | None, name: str, tag: str, key: str
    ) -> ModelVersion | None:
        try:
            raw = json.loads(self.objects.get(key))
        except ObjectNotFound:
            return None  # withdrawn between the listing and the read
        except (StorageError, ValueError) as exc:
            raise ModelUnavailable(f"{key}: unreadable manifest: {exc}") from None
        if not isinstance(raw, dict):
            raise ModelUnavailable(f"{key}: the manifest must be a mapping")
        raw = {**raw, "name": name, "tag": tag}  # the key is the authority, as the folder is
        return parse_manifest(raw, store.version_dir(name, tag, tenant), tenant=tenant, where=key)

    def fetch(self, version: ModelVersion, item: ModelFile) -> None:
        """Download one file of ``version`` to its cache path (atomically); the store then
        checks its sha256 against the manifest."""
        key = self.key(version.tenant, version.name, version.tag, item.path.name)
        item.path.parent.mkdir(parents=True, exist_ok=True)
        partial = item.path.with_name(
            f".{item.path.name}.part-{os.getpid()}-{threading.get_ident()}"
        )
        try:
            with partial.open("wb") as out:
                for chunk in self.objects.iter_chunks(key):
                    out.write(chunk)
            os.replace(partial, item.path)
        except ObjectNotFound:
            raise ModelUnavailable(
                f"model {version.name}:{version.tag}: {item.path.name} is not in the object storage"
            ) from None
        except StorageError as exc:
            raise ModelUnavailable(f"model {version.name}:{version.tag}: {exc}") from None
        finally:
            partial.unlink(missing_ok=True)

    # -- writing ---------------------------------------------------------------------------
    def publish(self, version: ModelVersion, folder: Path) -> None:
        """Upload a version prepared in ``folder`` (its files and manifest.json): the files
        first, the manifest last."""
        manifest = folder / MANIFEST
        keys = [
            self.key(version.tenant, version.name, version.tag, f.path.name) for f in version.files
        ]
        manifest_key = self.key(version.tenant, version.name, version.tag, MANIFEST)
        try:
            for item, key in zip(version.files, keys, strict=True):
                self.objects.put_stream(key, file_chunks(folder / item.path.name))
            self.objects.put(manifest_key, manifest.read_bytes())
        except StorageError as exc:
            for key in keys:
                self.objects.delete(key)
            raise ModelUnavailable(f"model {version.name}:{version.tag}: {exc}") from None
        self._forget(version.tenant)

    def withdraw(self, name: str, tag: str, tenant: str | None) -> bool:
        """Delete a stored version (the manifest first); False when there was none."""
        prefix = f"{self.prefix(tenant)}{name}/{tag}/"
        try:
            removed = self.objects.delete(self.key(tenant, name, tag, MANIFEST))
            for key in self.objects.list(prefix):
                self.objects.delete(key)
        except StorageError as exc:
            raise ModelUnavailable(f"model {name}:{tag}: {exc}") from None
        self._forget(tenant)
        return removed

    def _forget(self, tenant: str | None) -> None:
        with self._lock:
            for scope in [s for s in self._listed if s[0] == tenant]:
                del self._listed[scope]

    @staticmethod
    def _prune_cache(store: ModelStore, tenant: str | None, name: str, tags: set[str]) -> None:
        """Drop cached files of versions no longer stored (withdrawn through another
        process), so the cache holds only what can still be used."""
        folder = store.name_dir(name, tenant)
        if not folder.is_dir():
            return
        for tag_dir in folder.iterdir():
            if tag_dir.is_dir() and not tag_dir.name.startswith(".") and tag_dir.name not in tags:
                doomed = tag_dir.with_name(
                    f".{tag_dir.name}.deleting-{os.getpid()}-{threading.get_ident()}"
                )
                try:
                    tag_dir.rename(doomed)
                except OSError:
                    continue  # another thread pruned it
                shutil.rmtree(doomed, ignore_errors=True)

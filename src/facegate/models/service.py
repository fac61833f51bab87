"""Rules of tenant-private models: who may upload, what a file must satisfy before it is
accepted (parses with onnx, matches the processor contract of its kind, size cap, sha256
recorded), and tenant-scoped listing and removal."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import BinaryIO

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.manifest import SAFE_NAME, ModelVersion
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.networks.contracts import check_model_file
from facegate.errors import Conflict, Forbidden, InvalidInput, NotFound
from facegate.tenancy.tables import Policy

CHUNK = 1 << 20


class ModelService:
    """Tenant models in one store; every call is scoped to ``tenant``."""

    def __init__(self, store: ModelStore, max_bytes: int) -> None:
        self.store = store
        self.max_bytes = max_bytes

    def list(self, tenant: str) -> list[ModelVersion]:
        return self.store.list_models(tenant)

    def upload(
        self,
        tenant: str,
        policy: Policy,
        upload: BinaryIO,
        *,
        name: str,
        tag: str,
        kind: str,
        licence: str,
    ) -> ModelVersion:
        if not policy.allow_custom_models:
            raise Forbidden(
                "this tenant's policy does not allow custom models",
                limit="allow_custom_models",
            )
        for what, value in (("name", name), ("tag", tag)):
            if not SAFE_NAME.match(value):
                raise InvalidInput(
                    f"invalid {what} {value!r}: letters, digits, '.', '_', '-' (max 100)",
                    code="invalid-model",
                )
        if self.store.tags(name, tenant) and tag in self._own_tags(tenant, name):
            raise Conflict(f"model {name}:{tag} already exists; use a new tag", model=name)
        with tempfile.TemporaryDirectory(prefix="facegate-model-") as scratch:
            path = Path(scratch) / f"{name}.onnx"
            self._spool(upload, path)
            try:
                spec = check_model_file(path, kind, name)
                return self.store.add(
                    name,
                    tag,
                    {"model": path},
                    kind=kind,
                    licence=licence,
                    tenant=tenant,
                    input_spec=spec,
                )
            except ModelUnavailable as exc:
                if "already exists" in str(exc):
                    raise Conflict(str(exc), model=name) from None
                raise InvalidInput(
                    f"the model was refused: {exc}", code="invalid-model", model=name
                ) from None

    def delete(self, tenant: str, name: str, tag: str) -> None:
        if (
            not SAFE_NAME.match(name)
            or not SAFE_NAME.match(tag)
            or tag not in self._own_tags(tenant, name)
        ):
            raise NotFound("no such model")  # another tenant's model answers like a missing one
        try:
            self.store.remove(name, tag, tenant=tenant)
        except ModelUnavailable:
            raise NotFound("no such model") from None

    def _own_tags(self, tenant: str, name: str) -> set[str]:
        return {
            v.tag for v in self.store.list_models(tenant) if v.tenant == tenant and v.name == name
        }

    def _spool(self, upload: BinaryIO, path: Path) -> None:
        """Copy the upload to ``path``, refusing it once it passes the size cap."""
        written = 0
        with path.open("wb") as out:
            while chunk := upload.read(CHUNK):
                written += len(chunk)
                if written > self.max_bytes:
                    raise InvalidInput(
                        f"the model file is over the {self.max_bytes}-byte limit",
                        code="model-too-large",
                        limit="max_model_bytes",
                        limit_value=self.max_bytes,
                    )
                out.write(chunk)
        if written == 0:
            raise InvalidInput("the model file is empty", code="invalid-model")

"""Pydantic I/O of ``/v1/models`` and ``/v1/capabilities``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from facegate.engine.modelstore.manifest import ModelVersion


class ModelFileOut(BaseModel):
    role: str
    name: str
    sha256: str
    bytes: int


class ModelOut(BaseModel):
    """One installed model version: the tenant's own (``scope=tenant``), the installation's
    (``shared``) or one shipped in a package (``builtin``)."""

    name: str
    tag: str
    kind: str
    licence: str
    scope: Literal["tenant", "shared", "builtin"]
    input: dict[str, object]
    files: list[ModelFileOut]

    @classmethod
    def of(cls, version: ModelVersion) -> ModelOut:
        scope: Literal["tenant", "shared", "builtin"] = (
            "builtin" if version.builtin else "tenant" if version.tenant else "shared"
        )
        return cls(
            name=version.name,
            tag=version.tag,
            kind=version.kind,
            licence=version.licence,
            scope=scope,
            input=dict(version.input),
            files=[
                ModelFileOut(
                    role=f.role,
                    name=f.path.name,
                    sha256=f.sha256,
                    bytes=f.path.stat().st_size if f.path.is_file() else 0,
                )
                for f in version.files
            ],
        )


class ModelList(BaseModel):
    items: list[ModelOut]


class Limits(BaseModel):
    max_input_bytes: int
    max_input_pixels: int
    max_video_seconds: int
    max_output_resolution: str
    max_concurrent_jobs: int
    max_queued_jobs: int
    storage_quota_bytes: int
    storage_used_bytes: int
    retention_days: int
    max_concurrent_streams: int = Field(default=0, description="live streams at once; 0: off")
    max_stream_seconds: int = 900


class Capabilities(BaseModel):
    """What the calling tenant may use."""

    processors: list[str]
    sensitive_processors: list[str] = Field(
        description="Of ``processors``, those whose use is audited (and needs a consent "
        "attestation per source when the policy requires consent)"
    )
    models: list[str]
    output_formats: list[str]
    moderation: bool = Field(description="Inputs and outputs are checked by content moderation")
    require_consent: bool = Field(
        description="Jobs using a sensitive processor need a consent attestation per source"
    )
    limits: Limits

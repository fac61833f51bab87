"""What ``POST /v1/verify`` and ``facegate verify`` answer."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class ManifestOut(BaseModel):
    state: Literal["absent", "valid", "tampered"] = Field(
        description="absent: no C2PA manifest; valid: c2pa validated signature and binding; "
        "tampered: a manifest is there but the file or the manifest changed after signing"
    )
    signed_by_this_installation: bool
    claim_generator: str | None = None
    digital_source_type: str | None = None
    failures: list[str] = Field(default_factory=list, description="c2pa validation codes")


class WatermarkOut(BaseModel):
    found: bool = Field(
        description="a payload whose MAC verifies under this installation's key was read from "
        "the pixels (no other installation's mark can be told from no mark)"
    )
    by_this_installation: bool
    frames_read: int


class JobTrace(BaseModel):
    """Which job made the file: shown only to the owning tenant's keys and to admins."""

    job_id: uuid.UUID
    tenant_id: str
    traced_by: list[Literal["manifest", "watermark"]]


class VerifyOut(BaseModel):
    media: Literal["image", "video"]
    manifest: ManifestOut
    watermark: WatermarkOut
    made_by_this_installation: bool
    made_at: datetime | None = Field(
        default=None,
        description="when the job's mark was issued: only to the owning tenant and admins",
    )
    job: JobTrace | None = None


class ReportIn(BaseModel):
    """A third party's report of a file it believes this installation made."""

    message: str = Field(min_length=1, max_length=2000, description="what was found, where")
    contact: str | None = Field(default=None, max_length=200, description="how to reach you")


class ReportOut(BaseModel):
    report_id: str = Field(
        description="the report's case (opaque; the same report again answers the same case)"
    )
    made_by_this_installation: bool

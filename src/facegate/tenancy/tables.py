"""Tenant, Policy (1:1) and ApiKey tables. Created by migration ``0001_tenancy``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from facegate.database import Base, UtcDateTime, utcnow

# "erasing": an erasure is under way (resumable); "erased": a tombstone (takedown.erasure).
TenantStatus = Literal["active", "suspended", "erasing", "erased"]
Isolation = Literal["logical", "physical"]
Resolution = Literal["720p", "1080p", "1440p", "4k", "8k"]

# Width x height of each named output resolution (landscape; a portrait output is checked
# with its sides swapped, i.e. against the long and the short side).
RESOLUTIONS: dict[str, tuple[int, int]] = {
    "720p": (1280, 720),
    "1080p": (1920, 1080),
    "1440p": (2560, 1440),
    "4k": (3840, 2160),
    "8k": (7680, 4320),
}

# Processors a tenant gets when its policy does not say otherwise. Enhancers and the age
# modifier are plan features (the specification's enable_enhance / "enterprise only").
DEFAULT_PROCESSORS: tuple[str, ...] = ("face_swapper",)
ENHANCE_PROCESSORS: tuple[str, ...] = ("face_enhancer", "frame_enhancer")


def resolution_dimensions(name: str) -> tuple[int, int]:
    """``"4k"`` -> ``(3840, 2160)``; raises KeyError for an unknown name."""
    return RESOLUTIONS[name.lower()]


def fits_resolution(width: int, height: int, name: str) -> bool:
    """Whether a ``width`` x ``height`` output is within the named cap, either orientation."""
    cap_long, cap_short = resolution_dimensions(name)
    return max(width, height) <= cap_long and min(width, height) <= cap_short


class Tenant(Base):
    """A customer of the installation; its slug id prefixes everything it owns."""

    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(63), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="active")
    isolation: Mapped[str] = mapped_column(String(16), default="logical")
    # The specification's storage_path, kept only as information for operators: paths are
    # built exclusively by storage.TenantStore from the tenant id, never from this value.
    storage_path_info: Mapped[str | None] = mapped_column(String(1024), default=None)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, onupdate=utcnow)
    # When the tenant was erased (a tombstone: id, status, this); None for a live tenant.
    erased_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)

    policy: Mapped[Policy] = relationship(
        back_populates="tenant", uselist=False, cascade="all, delete-orphan", lazy="joined"
    )

    @property
    def is_active(self) -> bool:
        return self.status == "active"

    @property
    def is_erased(self) -> bool:
        """Erased, or being erased: nothing may be created or changed under its id."""
        return self.status in ("erasing", "erased")


class Policy(Base):
    """Quota and feature flags of one tenant."""

    __tablename__ = "policies"

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    max_concurrent_jobs: Mapped[int] = mapped_column(Integer, default=2)
    max_queued_jobs: Mapped[int] = mapped_column(Integer, default=100)
    requests_per_minute: Mapped[int] = mapped_column(Integer, default=120)
    device_limit: Mapped[int] = mapped_column(Integer, default=1)
    allowed_processors: Mapped[list[str]] = mapped_column(
        JSON, default=lambda: list(DEFAULT_PROCESSORS)
    )
    allowed_models: Mapped[list[str]] = mapped_column(JSON, default=lambda: ["*"])
    max_output_resolution: Mapped[str] = mapped_column(String(8), default="1080p")
    max_input_bytes: Mapped[int] = mapped_column(BigInteger, default=20 * 1024 * 1024)
    max_input_pixels: Mapped[int] = mapped_column(BigInteger, default=40_000_000)
    max_video_seconds: Mapped[int] = mapped_column(Integer, default=60)
    # Live streams (facegate.streams): how many at once (0: live is off, the default: a
    # plan feature an operator turns on) and how long one may run.
    max_concurrent_streams: Mapped[int] = mapped_column(Integer, default=0)
    max_stream_seconds: Mapped[int] = mapped_column(Integer, default=900)
    storage_quota_bytes: Mapped[int] = mapped_column(BigInteger, default=1024**3)
    retention_days: Mapped[int] = mapped_column(Integer, default=7)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    # Content moderation of inputs and outputs (jobs.moderation); only an admin turns it off.
    moderation: Mapped[bool] = mapped_column(Boolean, default=True)
    # A job using a sensitive processor needs a consent attestation per source (consent/).
    require_consent: Mapped[bool] = mapped_column(Boolean, default=False)
    # Art. 50(4) disclosure: a visible label ({"text", "corner"}) on every result; None: off.
    # The machine-readable marks (C2PA + watermark) are not a policy: always on.
    disclosure_label: Mapped[dict[str, str] | None] = mapped_column(JSON, default=None)
    # Tenant-private models (POST /v1/models) and which tag of each model its jobs use:
    # ``model_tag`` is the specification's MODEL_TAG, ``model_pins`` name -> tag,
    # ``model_splits`` name -> {tag: weight} (A/B, the variant recorded on the job).
    allow_custom_models: Mapped[bool] = mapped_column(Boolean, default=False)
    model_tag: Mapped[str | None] = mapped_column(String(100), default=None)
    model_pins: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    model_splits: Mapped[dict[str, dict[str, float]]] = mapped_column(JSON, default=dict)
    # What a swapped face the recogniser does not read as the source does (engine.report):
    # "keep" (flagged in the job's quality report), "untouched" (the target's face put
    # back) or "fail" (the job fails with ``weak-swap``, naming the face and its figures).
    weak_swap: Mapped[str] = mapped_column(String(16), default="keep", server_default="keep")
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, onupdate=utcnow)

    tenant: Mapped[Tenant] = relationship(back_populates="policy")

    def allows_processor(self, processor: str) -> bool:
        return processor in self.allowed_processors

    def allows_model(self, model: str) -> bool:
        return "*" in self.allowed_models or model in self.allowed_models

    def as_dict(self) -> dict[str, Any]:
        return {
            column.key: getattr(self, column.key)
            for column in self.__table__.columns
            if column.key not in {"tenant_id", "updated_at"}
        }


class ApiKey(Base):
    """An API key: only the sha256 of its secret is stored (see facegate.tenancy.keys)."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    secret_hash: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)

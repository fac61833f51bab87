"""Pydantic I/O of the tenancy package (admin API, ``tenant apply`` documents)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from facegate.engine.processors.registry import PROCESSORS
from facegate.principal import ALL_SCOPES, Scope
from facegate.tenancy.tables import DEFAULT_PROCESSORS, ENHANCE_PROCESSORS, RESOLUTIONS

TENANT_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"  # a DNS label, like a namespace
_DEFAULT_KEY_SCOPES: tuple[Scope, ...] = ("jobs:write", "jobs:read")
# The engine's processor names (its registry is the one list; importing it loads no models).
KNOWN_PROCESSORS = tuple(PROCESSORS)
_RESOLUTION_ALIASES = {"2160p": "4k", "4320p": "8k", "uhd": "4k", "fhd": "1080p", "hd": "720p"}


class DisclosureLabel(BaseModel):
    """The visible label a tenant's results carry (text, and the corner it sits in)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        default="AI-generated", min_length=1, max_length=60, pattern=r"^[ -~]+$"
    )  # printable ASCII: the label is drawn with OpenCV's Hershey font
    corner: Literal["top-left", "top-right", "bottom-left", "bottom-right"] = "bottom-right"


class PolicySpec(BaseModel):
    """A tenant's quota and features. Missing fields take the defaults below, so a document
    describes the whole desired policy (``apply`` semantics).

    Also accepts the specification's vocabulary: ``gpu_limit`` (string or int) for
    ``device_limit``, ``enable_enhance`` (adds or removes the face and frame enhancers),
    ``enable_age_change`` (the age modifier), ``output_resolution`` for
    ``max_output_resolution``, and a whole tenant document ``{"tenant_id", "quota", ...}``.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    max_concurrent_jobs: int = Field(default=2, ge=1, le=10_000)
    max_queued_jobs: int = Field(default=100, ge=0, le=1_000_000)
    requests_per_minute: int = Field(default=120, ge=1, le=1_000_000)
    device_limit: int = Field(default=1, ge=0, le=1024, validation_alias="gpu_limit")
    allowed_processors: list[str] = Field(default_factory=lambda: list(DEFAULT_PROCESSORS))
    allowed_models: list[str] = Field(default_factory=lambda: ["*"])
    max_output_resolution: Literal["720p", "1080p", "1440p", "4k", "8k"] = Field(
        default="1080p", validation_alias="output_resolution"
    )
    max_input_bytes: int = Field(default=20 * 1024 * 1024, ge=1, le=2**40)
    max_input_pixels: int = Field(default=40_000_000, ge=1, le=2**34)
    max_video_seconds: int = Field(default=60, ge=0, le=86_400)
    # Live streams: 0 = live off (the default: an operator turns it on per plan).
    max_concurrent_streams: int = Field(default=0, ge=0, le=1000)
    max_stream_seconds: int = Field(default=900, ge=1, le=86_400)
    storage_quota_bytes: int = Field(default=1024**3, ge=0, le=2**50)
    retention_days: int = Field(default=7, ge=1, le=3650)
    priority: int = Field(default=0, ge=-100, le=100)
    moderation: bool = True  # admin-only (the policy is); off = no content moderation
    # Jobs using a sensitive processor must carry a consent attestation per source image.
    require_consent: bool = False
    # A visible "AI-generated" label on every result (EU AI Act Art. 50(4)); off by default.
    # Nothing here turns off the C2PA manifest or the watermark: they are always on.
    disclosure_label: DisclosureLabel | None = None
    allow_custom_models: bool = False
    model_tag: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$", validation_alias="MODEL_TAG"
    )
    model_pins: dict[str, str] = Field(default_factory=dict)
    model_splits: dict[str, dict[str, float]] = Field(default_factory=dict)
    # A swapped face that is not ``transferred`` (engine.report): kept and flagged, left as
    # it was in the target, or the job fails naming the face.
    weak_swap: Literal["keep", "untouched", "fail"] = "keep"

    @field_validator("model_splits")
    @classmethod
    def _splits_have_weight(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for name, weights in value.items():
            if not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
                raise ValueError(f"A/B split of {name!r} needs non-negative weights, sum > 0")
        return value

    @model_validator(mode="before")
    @classmethod
    def _accept_specification_vocabulary(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "quota" in data:  # a whole tenant document: the policy is its quota
            data = dict(data["quota"] or {})
        processors = list(data.get("allowed_processors") or DEFAULT_PROCESSORS)
        for flag, features in (
            ("enable_enhance", ENHANCE_PROCESSORS),
            ("enable_age_change", ("age_modifier",)),
        ):
            if flag not in data:
                continue
            enabled = data.pop(flag)
            if not isinstance(enabled, bool):
                raise ValueError(f"{flag} must be true or false")
            processors = [p for p in processors if p not in features]
            if enabled:
                processors.extend(features)
        if "allowed_processors" in data or processors != list(DEFAULT_PROCESSORS):
            data["allowed_processors"] = processors
        return data

    @field_validator("max_output_resolution", mode="before")
    @classmethod
    def _normalise_resolution(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().lower()
            return _RESOLUTION_ALIASES.get(value, value)
        return value

    @field_validator("allowed_processors")
    @classmethod
    def _known_processors(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(KNOWN_PROCESSORS))
        if unknown:
            raise ValueError(f"unknown processors {unknown}; known: {list(KNOWN_PROCESSORS)}")
        return sorted(set(value))

    @field_validator("allowed_models")
    @classmethod
    def _model_names(cls, value: list[str]) -> list[str]:
        return sorted({name.strip() for name in value if name.strip()})

    def values(self) -> dict[str, Any]:
        return self.model_dump()


assert set(RESOLUTIONS) == {"720p", "1080p", "1440p", "4k", "8k"}


class TenantSpec(BaseModel):
    """A tenant as declared (admin API body, one entry of ``tenants.yaml``).

    ``tenant_id``/``quota``/``storage_path`` are the specification's names for
    ``id``/``policy``/(informational only). ``storage_path`` is recorded for operators but
    never used as a path: storage keys are built from the tenant id by TenantStore alone.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(pattern=TENANT_ID_PATTERN, validation_alias="tenant_id")
    name: str | None = Field(default=None, max_length=200)
    status: Literal["active", "suspended"] = "active"
    isolation: Literal["logical", "physical"] = "logical"
    policy: PolicySpec = Field(default_factory=PolicySpec, validation_alias="quota")
    storage_path: str | None = Field(default=None, max_length=1024)


class TenantUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=200)
    isolation: Literal["logical", "physical"] | None = None


class PolicyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    max_concurrent_jobs: int
    max_queued_jobs: int
    requests_per_minute: int
    device_limit: int
    allowed_processors: list[str]
    allowed_models: list[str]
    max_output_resolution: str
    max_input_bytes: int
    max_input_pixels: int
    max_video_seconds: int
    max_concurrent_streams: int = 0
    max_stream_seconds: int = 900
    storage_quota_bytes: int
    retention_days: int
    priority: int
    moderation: bool
    require_consent: bool = False
    disclosure_label: DisclosureLabel | None = None
    allow_custom_models: bool = False
    model_tag: str | None = None
    model_pins: dict[str, str] = Field(default_factory=dict)
    model_splits: dict[str, dict[str, float]] = Field(default_factory=dict)
    weak_swap: str = "keep"


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    status: str
    isolation: str
    storage_path_info: str | None = Field(
        description="The declared storage_path, informational only (never used as a path)"
    )
    created_at: datetime
    updated_at: datetime
    # None for an erased tenant (a tombstone keeps its id, status and erased_at only).
    policy: PolicyOut | None
    erased_at: datetime | None = None


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=200)
    scopes: list[Scope] = Field(default_factory=lambda: list(_DEFAULT_KEY_SCOPES), min_length=1)
    expires_at: datetime | None = None

    @field_validator("scopes")
    @classmethod
    def _unique(cls, value: list[Scope]) -> list[Scope]:
        return [scope for scope in ALL_SCOPES if scope in value]

    @field_validator("expires_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("expires_at needs a time zone (e.g. 2030-01-01T00:00:00Z)")
        return value


class KeyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    tenant_id: str
    name: str
    scopes: list[str]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


class KeyCreated(KeyOut):
    token: str = Field(description="The API key. Shown only in this response; store it now.")

"""Webhook I/O: an endpoint as created and read (the secret only at creation and
rotation), and the delivery log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from facegate.webhooks.tables import EVENT_TYPES, EventType

MAX_GRACE_SECONDS = 7 * 24 * 3600


class EndpointCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048, description="http(s) URL on a public host")
    event_types: list[EventType] = Field(
        default_factory=lambda: list(EVENT_TYPES),  # type: ignore[arg-type]
        min_length=1,
        description="Events sent to it (default: all)",
    )
    description: str = Field(default="", max_length=200)


class EndpointOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    url: str
    event_types: list[str]
    description: str
    enabled: bool
    created_by: str
    created_at: datetime
    previous_secret_expires_at: datetime | None


class EndpointCreated(EndpointOut):
    secret: str = Field(description="whsec_...: shown once; verifies the signatures")


class RotateSecret(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grace_seconds: int = Field(
        default=24 * 3600,
        ge=0,
        le=MAX_GRACE_SECONDS,
        description="How long the old secret keeps signing beside the new one",
    )


class SecretRotated(BaseModel):
    id: uuid.UUID
    secret: str
    previous_secret_expires_at: datetime | None


class DeliveryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    message_id: str
    endpoint_id: uuid.UUID | None
    event_type: str
    job_id: uuid.UUID | None
    status: str
    attempts: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    attempt_log: list[dict[str, Any]]
    created_at: datetime
    finished_at: datetime | None

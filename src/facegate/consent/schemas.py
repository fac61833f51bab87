"""The ``consent`` form field of ``POST /v1/jobs``: one attestation per source image (a list
in source order), or one object that attests every source."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from facegate.database import utcnow
from facegate.errors import InvalidInput

#: Clock skew allowed between the client's ``attested_at`` and the server.
FUTURE_SKEW = timedelta(minutes=5)
MAX_FIELD_CHARS = 16_384


class ConsentIn(BaseModel):
    """Who attests that the person in the source agreed, the consent statement's version
    they agreed to, and when (default: now)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attested_by: str = Field(min_length=1, max_length=200)
    statement_version: str = Field(min_length=1, max_length=64, pattern=r"^[\w.:-]+$")
    attested_at: datetime | None = None

    @field_validator("attested_by")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("attested_by is blank")
        return value.strip()

    @field_validator("attested_at")
    @classmethod
    def _aware_and_past(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("attested_at needs a time zone (e.g. 2030-01-01T00:00:00Z)")
        if value > utcnow() + FUTURE_SKEW:
            raise ValueError("attested_at is in the future")
        return value


class ConsentRef(BaseModel):
    """What a job records of each source's attestation (the row is the evidence)."""

    source: str
    attestation_id: str
    source_sha256: str
    attested_by: str
    statement_version: str
    attested_at: datetime


def parse_consent(raw: str | None, sources: int) -> list[ConsentIn]:
    """The ``consent`` field as one attestation per source ([] when absent)."""
    if raw is None or not raw.strip():
        return []
    if len(raw) > MAX_FIELD_CHARS:
        raise _invalid(f"consent is over {MAX_FIELD_CHARS} characters")
    try:
        value = json.loads(raw)
        items = value if isinstance(value, list) else [value] * sources
        parsed = [ConsentIn.model_validate(item) for item in items]
    except json.JSONDecodeError as exc:
        raise _invalid(f"consent is not valid JSON: {exc.msg}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "consent"
        raise _invalid(f"consent: {where}: {first['msg']}") from None
    if len(parsed) != sources:
        raise _invalid(
            f"consent lists {len(parsed)} attestations for {sources} source images "
            "(one per source, in order, or one object for all)"
        )
    return parsed


def _invalid(detail: str) -> InvalidInput:
    return InvalidInput(detail, code="invalid-consent")

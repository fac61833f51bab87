"""Face library I/O. The embedding is never returned: it is biometric data, used inside."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    computed_field,
)

from facegate.consent.schemas import ConsentRef
from facegate.engine.swap.mesh_warp import Tuning
from facegate.errors import InvalidInput

Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
MAX_LABELS = 20


class _Labels(BaseModel):
    labels: list[Label] = Field(default_factory=list, max_length=MAX_LABELS)


@dataclass(frozen=True)
class JobSources:
    """Saved faces as a job's sources: the prepared images, in the order asked, and the
    consent records of those that have one."""

    images: list[bytes]
    consent: list[ConsentRef]
    missing_consent: list[str]  # names of faces saved without a consent record


class FaceOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    labels: list[str]
    width: int
    height: int
    face_index: int
    face_order: str
    face_box: list[float]
    embedding_kind: str
    turned: float | None = Field(
        description="How far the face is turned from the camera: the larger of its yaw and "
        "pitch, in degrees (null: saved before this was recorded)"
    )
    consent: ConsentRef | None
    image_sha256: str
    created_by: str
    created_at: datetime
    updated_at: datetime

    @computed_field(  # type: ignore[prop-decorator]
        description="The most a source face may be turned (degrees) for the built-in swapper "
        "(mesh_warp), which refuses one turned further (source-unusable)"
    )
    @property
    def builtin_swap_max_turn(self) -> float:
        return Tuning().max_source_turn

    @computed_field(  # type: ignore[prop-decorator]
        description="Whether the built-in swapper can use this face as a source (turned at "
        "most builtin_swap_max_turn); null when the angle is unknown"
    )
    @property
    def builtin_swap_usable(self) -> bool | None:
        return None if self.turned is None else Tuning().takes_source(self.turned)


class FaceUpdate(BaseModel):
    """A rename and/or new labels."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    labels: list[Label] | None = Field(default=None, max_length=MAX_LABELS)


def parse_labels(raw: str | None) -> list[str]:
    """The ``labels`` form field: a JSON array of strings ([] when absent)."""
    if raw is None or not raw.strip():
        return []
    try:
        labels = _Labels.model_validate({"labels": json.loads(raw)}).labels
    except (json.JSONDecodeError, ValidationError) as exc:
        raise InvalidInput(
            f"labels must be a JSON array of at most {MAX_LABELS} strings of 1 to 64 "
            f"characters ({type(exc).__name__})",
            code="invalid-labels",
        ) from None
    return sorted(set(labels))


def check_name(raw: str) -> str:
    name = raw.strip()
    if not 1 <= len(name) <= 200:
        raise InvalidInput("name must have 1 to 200 characters", code="invalid-name")
    return name


class FoundFace(BaseModel):
    """One detected face: its position in selector order, its box in upright image pixels
    (x1, y1, x2, y2) and the detector's score."""

    index: int
    box: list[float] = Field(min_length=4, max_length=4)
    score: float


class FoundFaces(BaseModel):
    """The upright image's size and its faces."""

    width: int
    height: int
    order: str
    faces: list[FoundFace]

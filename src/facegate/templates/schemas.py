"""Job template I/O."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from facegate.jobs.service import MAX_SOURCES

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class TemplateCreate(BaseModel):
    """A processor pipeline with its options, and which saved faces go where, by name."""

    model_config = ConfigDict(extra="forbid")

    name: Name = Field(description="Unique within the tenant; jobs may name it instead of its id")
    description: str = Field(default="", max_length=1000)
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="A job's options object (processors, processor_options, selector, "
        "output, or their shortcuts), validated as a job's would be",
    )
    faces: list[Name] = Field(
        default_factory=list,
        max_length=MAX_SOURCES,
        description="Saved faces of the library by name: the sources, in this order. Empty: "
        "the job or batch brings its sources",
    )
    mapping: dict[Name, Annotated[int, Field(ge=0, le=255)]] | None = Field(
        default=None,
        description="face name -> target face index (after the selector's order): which "
        "saved face goes onto which face of each target",
    )


class TemplateOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    description: str
    options: dict[str, Any] = Field(description="The options as validated (a PipelineSpec)")
    faces: list[str]
    mapping: dict[str, int] | None
    created_by: str
    created_at: datetime

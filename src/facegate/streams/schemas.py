"""Pydantic I/O of ``/v1/streams``."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from facegate.stream_registry import StreamRecord
from facegate.streams.tables import LiveStreamRow

MAX_SDP_CHARS = 64_000
# An uploaded source image travels base64 in the JSON body; the tenant's max_input_bytes
# applies to the decoded bytes (this only bounds the text).
MAX_SOURCE_CHARS = 48 * 1024 * 1024


class StreamStart(BaseModel):
    """An SDP offer and what to swap into it."""

    model_config = ConfigDict(extra="forbid")

    sdp: str = Field(min_length=1, max_length=MAX_SDP_CHARS, description="the SDP offer")
    type: Literal["offer"] = "offer"
    source_face_id: uuid.UUID | None = Field(
        default=None, description="a saved face of the library (needs faces:read)"
    )
    source_image: str | None = Field(
        default=None,
        max_length=MAX_SOURCE_CHARS,
        description="or a source image, base64 (JPEG, PNG, WebP)",
    )
    options: dict[str, Any] | None = Field(
        default=None,
        description="as a job's options: processors (within the tenant's policy), "
        "processor_options, selector",
    )
    consent: dict[str, Any] | None = Field(
        default=None,
        description="the source image's consent attestation ({attested_by, "
        "statement_version, attested_at}), when the policy requires one",
    )

    @model_validator(mode="after")
    def _one_source(self) -> StreamStart:
        if (self.source_face_id is None) == (self.source_image is None):
            raise ValueError("send exactly one of source_face_id and source_image")
        return self


#: the figures a stream's heartbeat keeps in its row (``LiveStreamRow.stats``), so that a
#: process that does not run it shows them as of that heartbeat
SHARED_STATS = (
    "fps",
    "latency_ms",
    "stages_ms",
    "frames_in",
    "frames_out",
    "frames_dropped",
    "width",
    "height",
    "end_detail",
)


class StreamOut(BaseModel):
    id: uuid.UUID
    state: Literal["live", "ended"]
    created_at: datetime
    ended_at: datetime | None = None
    seconds: float = Field(description="seconds live so far (or in all, once ended)")
    fps: float = Field(description="swapped frames sent per second, over the last 2 s")
    latency_ms: float | None = Field(
        description="p95 of the recent frames' time in the server: camera frame received "
        "to swapped frame ready"
    )
    stages_ms: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="the recent frames' time per stage in the server, p50 and p95 in ms: "
        "queue (camera frame received to the engine taking it), convert (YUV to and from "
        "BGR), fit, analyse (detect or track), render (the swap), finish (label, "
        "watermark), send (swapped frame ready to the encoder taking it)",
    )
    frames_in: int
    frames_out: int
    frames_dropped: int = Field(description="camera frames skipped: a newer one came first")
    width: int | None = None
    height: int | None = None
    end_reason: str | None = Field(
        default=None,
        description="why it ended: client-ended, client-silent, deleted, max_stream_seconds, "
        "content-policy-violation, credentials-revoked, tenant-suspended, "
        "server-stopping, server-lost (its process died: ended as of its last "
        "heartbeat), failed",
    )
    end_detail: str | None = None

    @classmethod
    def of(cls, record: StreamRecord) -> StreamOut:
        stats = record.stats
        live = record.state == "live"
        return cls(
            id=record.id,
            state=record.state,
            created_at=record.created_at,
            ended_at=record.ended_at,
            seconds=record.seconds,
            fps=stats.fps() if live else 0.0,
            latency_ms=stats.latency_ms(),
            stages_ms=stats.stages_ms(),
            frames_in=stats.frames_in,
            frames_out=stats.frames_out,
            frames_dropped=stats.frames_dropped,
            width=record.width,
            height=record.height,
            end_reason=record.end_reason,
            end_detail=record.end_detail,
        )

    @classmethod
    def of_row(cls, row: LiveStreamRow, frames: int) -> StreamOut:
        """A stream this process does not run, as the database has it (another process
        runs it, or ran it): its figures as of its last heartbeat (``frames``, the frames
        last metered, where the row has none)."""
        stats: dict[str, Any] = {"frames_in": frames, "frames_out": frames, "frames_dropped": 0}
        stats |= row.stats or {}
        live = row.ended_at is None
        return cls.model_validate(
            {
                **stats,
                "id": row.id,
                "state": "live" if live else "ended",
                "created_at": row.started_at,
                "ended_at": row.ended_at,
                "seconds": round(row.seconds, 3),
                "fps": stats.get("fps", 0.0) if live else 0.0,
                "latency_ms": stats.get("latency_ms"),
                "end_reason": row.end_reason,
            }
        )


class StreamAnswer(StreamOut):
    sdp: str = Field(description="the SDP answer")
    type: Literal["answer"] = "answer"


class StreamList(BaseModel):
    items: list[StreamOut]

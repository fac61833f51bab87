"""``live_streams``: each live stream while it runs and after, with its heartbeat. Created
by migration 0028_live_stream_heartbeats. ``stream_nodes``: each API process that can take
streams handed to it by its peers, with its room for more (migration
0030_live_stream_placement; facegate.streams.placement).

The process that runs a stream writes its heartbeat (``heartbeat_at``, ``seconds`` live so
far) in the transaction of each usage checkpoint, so the usage record and the heartbeat
always agree. A ``DELETE`` answered by another process sets ``stop_requested_at``; the
process running the stream reads it within a second and ends it (migration
0030_live_stream_placement). A stream whose heartbeat stops while it has no ``ended_at``
lost its process (killed, its machine gone): any process's sweep ends it as of its last
heartbeat (``streams.service.sweep_lost_streams``). No foreign key to tenants, as usage
records.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, Index, Integer, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from facegate.database import Base, UtcDateTime


class LiveStreamRow(Base):
    __tablename__ = "live_streams"
    __table_args__ = (
        Index("ix_live_streams_open", "ended_at", "heartbeat_at"),
        Index("ix_live_streams_tenant", "tenant_id", "started_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(63), nullable=False)
    #: the process running it (host:pid), for operators
    node: Mapped[str] = mapped_column(String(200), nullable=False)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False)
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False)
    seconds: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)
    end_reason: Mapped[str | None] = mapped_column(String(40), default=None)
    #: its figures as of the last heartbeat (``StreamOut``'s fps, latency_ms, stages_ms,
    #: frames_in/out/dropped, width, height, end_detail), for the other processes to show
    stats: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    #: a DELETE asked for its end on a process that does not run it
    stop_requested_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), default=None)


class StreamNode(Base):
    """An API process its peers may hand a stream's start to: its address as they reach it
    (``stream_peer_url``), how many more streams it would admit now, and when it said so.
    Belongs to no tenant."""

    __tablename__ = "stream_nodes"

    url: Mapped[str] = mapped_column(String(500), primary_key=True)
    #: host:pid, as ``LiveStreamRow.node``, for operators
    node: Mapped[str] = mapped_column(String(200), nullable=False)
    room: Mapped[int] = mapped_column(Integer, nullable=False)
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime(), nullable=False)

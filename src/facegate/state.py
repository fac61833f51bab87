"""What the running app holds: settings, database engine and session factory, face engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import anyio
from sqlalchemy import Engine

from facegate.database import SessionFactory
from facegate.engine.runtime import EngineRuntime
from facegate.library.analysis import AnalysisSlots
from facegate.prepared import ReadPath
from facegate.settings import Settings
from facegate.stream_registry import StreamRegistry
from facegate.tenancy.jwt import JwtVerifier


@dataclass
class AppState:
    """Shared by routes (``request.app.state.facegate``) and background services."""

    settings: Settings
    engine: Engine
    session_factory: SessionFactory
    jwt_verifier: JwtVerifier | None
    #: The face engine of this process (models, processors, analyser), shared by the
    #: routes that analyse images and by the embedded workers.
    face_engine: EngineRuntime
    #: Room for the face analysis routes run here (``library.analysis``).
    face_analysis: AnalysisSlots
    #: Verifications without credentials decoding at once (``public_verify_concurrency``).
    public_verify_limiter: anyio.CapacityLimiter = field(
        default_factory=lambda: anyio.CapacityLimiter(2)
    )
    #: The live streams this process runs (``facegate.streams``).
    streams: StreamRegistry = field(default_factory=StreamRegistry)
    #: Their engine children (a ``facegate.streams.engines.StreamEngines``), started with the
    #: first stream; typed loosely: ``facegate.streams`` uses the jobs' modules, which use this
    #: one, so naming the class here would close an import circle (``tests/test_layers.py``).
    stream_engines: Any = None

    @cached_property
    def reads(self) -> ReadPath:
        """Where the prepared reads of the routes run (``facegate.prepared``)."""
        return ReadPath(self.engine)

    @cached_property
    def worker_memory_budget(self) -> int:
        """The memory budget a worker of this process gets (``Settings.worker_memory_budget``):
        read once, not from ``/proc`` on every submission (what stands in for the workers'
        budgets when none is registered, ``facegate.jobs.capacity``)."""
        return self.settings.worker_memory_budget()

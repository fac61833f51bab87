"""The streams as a background service of the app: at start-up, and every checkpoint
interval after, the streams whose process died are ended (``sweep_lost_streams``: usage as
of their last heartbeat, ``stream.end``) and, with ``stream_peer_url``, this process's room
for more streams is written for its peers (facegate.streams.placement); at start-up
``stream_engines_warm`` engine children are started in the background for the first
streams (facegate.streams.engines); at shutdown every live stream of this process ends
(``server-stopping``), so each is metered and audited and its client told, and its peers
stop handing it streams."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from facegate.database import session_scope
from facegate.observability import metrics
from facegate.state import AppState
from facegate.streams import placement
from facegate.streams.engines import StreamEngines
from facegate.streams.service import LOST, LostStream, sweep_lost_streams

log = structlog.get_logger("facegate.streams")


def sweep(state: AppState) -> list[LostStream]:
    """One sweep of the lost streams (any process's), logged and counted."""
    with session_scope(state.session_factory) as session:
        lost = sweep_lost_streams(session, state.settings.stream_checkpoint_seconds)
    for stream in lost:
        metrics.stream_lost(stream.tenant_id, LOST)
        log.warning(
            "stream.lost",
            stream_id=str(stream.stream_id),
            tenant_id=stream.tenant_id,
            seconds=stream.seconds,
            node=stream.node,
        )
    return lost


async def _sweeping(state: AppState) -> None:
    every = state.settings.stream_checkpoint_seconds
    while True:
        try:
            await asyncio.to_thread(sweep, state)
            await asyncio.to_thread(
                placement.beat, state.settings, state.session_factory, state.streams
            )
        except Exception:  # the database away for a moment: the next round tries again
            log.exception("stream.sweep_failed")
        await asyncio.sleep(every)


def process_engines(state: AppState) -> StreamEngines | None:
    """This process's engine children (made on first use; their CPU is the streams'), or
    None when streams run their engine in a thread (``stream_engine_process`` off)."""
    if state.settings.stream_engine_process and state.stream_engines is None:
        made = state.stream_engines = StreamEngines(state.settings)
        state.streams.cpu.count_cpu(made.cpu_seconds)
    engines: StreamEngines | None = state.stream_engines
    return engines


def warm_engines(state: AppState) -> threading.Thread | None:
    """Start the process's warm engine children in a thread of their own (None: none to
    start)."""
    settings = state.settings
    count = min(settings.stream_engines_warm, settings.streams_per_process)
    engines = process_engines(state) if count > 0 else None
    if engines is None:
        return None
    thread = threading.Thread(
        target=engines.warm_up, args=(count,), name="stream-engines-warm", daemon=True
    )
    thread.start()
    return thread


@asynccontextmanager
async def streams_service(state: AppState) -> AsyncIterator[None]:
    warm_engines(state)
    sweeper = asyncio.get_running_loop().create_task(_sweeping(state))
    try:
        yield
    finally:
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
        await state.streams.stop_all("server-stopping")
        with contextlib.suppress(Exception):  # the database away: the row goes stale
            await asyncio.to_thread(placement.leave, state.settings, state.session_factory)

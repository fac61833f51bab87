"""The streams as a background service of the app: at start-up, and every checkpoint
interval after, the streams whose process died are ended (``sweep_lost_streams``: usage as
of their last heartbeat, ``stream.end``); at shutdown every live stream of this process
ends (``server-stopping``), so each is metered and audited and its client told."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from facegate.database import session_scope
from facegate.observability import metrics
from facegate.state import AppState
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
        except Exception:  # the database away for a moment: the next round tries again
            log.exception("stream.sweep_failed")
        await asyncio.sleep(every)


@asynccontextmanager
async def streams_service(state: AppState) -> AsyncIterator[None]:
    sweeper = asyncio.get_running_loop().create_task(_sweeping(state))
    try:
        yield
    finally:
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
        await state.streams.stop_all("server-stopping")

"""The streams as a background service of the app: at shutdown every live stream ends
(``server-stopping``), so each is metered and audited and its client told."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from facegate.state import AppState


@asynccontextmanager
async def streams_service(state: AppState) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await state.streams.stop_all("server-stopping")

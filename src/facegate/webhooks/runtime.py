"""Wiring into the running app: the dispatcher runs beside the job workers (``SERVICES``
in facegate.api.app), so an installation without workers sends no webhooks either. A
tenant-bound ``serve`` (``FACEGATE_WORKER_TENANTS`` / ``TENANT_ID``: a tenant's own pod)
sends only its tenants' webhooks, with only their secrets, as its workers run only their
jobs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread

from facegate.queue.postgres import ServedTenants
from facegate.state import AppState
from facegate.webhooks.dispatcher import DeliveryConfig, WebhookDispatcher


@asynccontextmanager
async def deliveries_service(state: AppState) -> AsyncIterator[WebhookDispatcher | None]:
    if state.settings.workers == 0:
        yield None
        return
    served = ServedTenants.parse(state.settings.worker_tenants)
    dispatcher = WebhookDispatcher(
        state.engine, DeliveryConfig.from_settings(state.settings), tenants=served.tenants
    )
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        await anyio.to_thread.run_sync(dispatcher.stop)

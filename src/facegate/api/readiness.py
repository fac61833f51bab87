"""Readiness checks for ``/readyz``: database, object storage, Redis (when configured),
model store. Each is one cheap round trip; a failing one names itself in the answer."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable

import redis
from sqlalchemy import text

from facegate.jobs.runtime import tenant_store_for
from facegate.state import AppState

Check = Callable[[AppState], None]
PROBE_KEY = "_readyz/probe"


def check_database(state: AppState) -> None:
    with state.engine.connect() as connection:
        connection.execute(text("SELECT 1"))


def check_storage(state: AppState) -> None:
    # exists() is one stat (local) or one HEAD (S3): the backend answers, nothing is written.
    tenant_store_for(state.settings).store.exists(PROBE_KEY)


def check_redis(state: AppState) -> None:
    url = state.settings.redis_url
    if url is None:
        return
    client = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
    try:
        client.ping()
    finally:
        client.close()


def check_models(state: AppState) -> None:
    # The built-in models ship inside the mediapipe wheel; an operator's model store, when
    # present, must be readable.
    if importlib.util.find_spec("mediapipe") is None:
        raise RuntimeError("the built-in face models (mediapipe) are not installed")
    models_dir = state.settings.models_dir
    if models_dir.exists() and not os.access(models_dir, os.R_OK | os.X_OK):
        raise RuntimeError(f"model store {models_dir} is not readable")


CHECKS: dict[str, Check] = {
    "database": check_database,
    "storage": check_storage,
    "redis": check_redis,
    "models": check_models,
}


def run_checks(state: AppState) -> dict[str, str]:
    """name -> "ok" or the failure's class name (never its message: it may hold a URL)."""
    results: dict[str, str] = {}
    for name, check in CHECKS.items():
        if name == "redis" and state.settings.redis_url is None:
            results[name] = "not configured"
            continue
        try:
            check(state)
        except Exception as exc:
            results[name] = f"failed: {type(exc).__name__}"
        else:
            results[name] = "ok"
    return results

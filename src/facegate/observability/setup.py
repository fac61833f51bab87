"""Wires observability into the app: logging configuration, the tenant-label cap, the
model-load hook and the HTTP middleware (``create_app`` calls :func:`install_observability`
after its own middleware, so this one is outermost and sees the final status)."""

from __future__ import annotations

from fastapi import FastAPI

from facegate.observability.http import ObservabilityMiddleware
from facegate.observability.labels import tenant_label
from facegate.observability.logging import configure_logging
from facegate.observability.metrics import install_model_load_hook
from facegate.settings import Settings


def install_observability(app: FastAPI, settings: Settings) -> None:
    configure_logging(settings.log_level, fmt=settings.log_format, secrets=settings.secret_values())
    tenant_label.reconfigure(settings.metrics_tenant_cap)
    install_model_load_hook()
    if settings.metrics_enabled:
        app.add_middleware(ObservabilityMiddleware, access_log=settings.access_log)

"""``facegate api``: the HTTP API alone, for the cluster shape (workers run elsewhere)."""

from __future__ import annotations

import os

import click
import uvicorn

from facegate.api.app import ServiceFactory, create_app, default_services
from facegate.cli.common import private_files, require_free_port
from facegate.database import prepare_schema
from facegate.models.requests import inference_pool_settings
from facegate.observability.logging import UVICORN_LOGGING
from facegate.settings import get_settings
from facegate.worker.scratch import process_scratch_service


@click.command()
@click.option("--host", default=None, help="Bind address (FACEGATE_HOST, default 127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=None, help="Port (FACEGATE_PORT, 8000)."
)
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Uvicorn worker processes (the API is stateless; PostgreSQL holds the state).",
)
def api(host: str | None, port: int | None, processes: int) -> None:
    """Serve the API without job workers: `facegate worker` processes run the jobs."""
    # No in-process workers whatever FACEGATE_WORKERS says: this process only accepts work.
    private_files()
    settings = get_settings(host=host, port=port, workers=0)
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise click.UsageError("FACEGATE_TLS_CERT and FACEGATE_TLS_KEY go together")
    require_free_port(settings.host, settings.port)
    prepare_schema(settings.database_url, settings.schema_on_start)
    common = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level.lower(),
        "ssl_certfile": str(settings.tls_cert) if settings.tls_cert else None,
        "ssl_keyfile": str(settings.tls_key) if settings.tls_key else None,
        **UVICORN_LOGGING,
    }
    if processes == 1:
        uvicorn.run(create_app(settings, services=api_services()), **common)
        return
    # Several processes re-import the app by name; they read the same FACEGATE_* settings.
    # A device this machine lacks is refused here, once, before they start.
    inference_pool_settings(settings)
    os.environ["FACEGATE_WORKERS"] = "0"
    uvicorn.run("facegate.cli.api:app_from_environment", factory=True, workers=processes, **common)


def api_services() -> list[ServiceFactory]:
    """The background services of one API process: first its scratch space (made its
    temporary directory at start-up, deleted at a clean stop; reclaimed by the next process
    if this one is killed), then the app's own."""
    return [process_scratch_service, *default_services()]


def app_from_environment() -> object:
    # Each uvicorn process its own scratch space.
    return create_app(get_settings(workers=0), services=api_services())

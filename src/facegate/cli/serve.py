"""``facegate serve``: the embedded shape on one machine (the API, and its workers as child
processes: facegate.worker.children)."""

from __future__ import annotations

from pathlib import Path

import click
import uvicorn

from facegate.api.app import create_app, default_services
from facegate.cli.common import private_files, require_free_port
from facegate.cli.demo import demo_banner, ensure_demo
from facegate.database import prepare_schema
from facegate.observability.logging import UVICORN_LOGGING
from facegate.settings import get_settings
from facegate.worker.scratch import process_scratch_service


@click.command()
@click.option(
    "--demo",
    is_flag=True,
    default=None,
    help="Create tenant 'demo' and print its API key and a platform admin key (kept in "
    "var/demo-key and var/demo-admin-key, re-used by the next start).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=None,
    help="Job workers (FACEGATE_WORKERS, default 2), run in a child process at a lower CPU "
    "priority, beside a short-job lane (FACEGATE_SHORT_LANE_WORKERS, default 1); 0: no "
    "workers (docs/scheduling.md).",
)
@click.option("--host", default=None, help="Bind address (FACEGATE_HOST, default 127.0.0.1).")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port (FACEGATE_PORT, default 8000).",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate: serve HTTPS (with HSTS).",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM private key of --tls-cert.",
)
def serve(
    demo: bool | None,
    workers: int | None,
    host: str | None,
    port: int | None,
    tls_cert: Path | None,
    tls_key: Path | None,
) -> None:
    """Run the API with its job workers on SQLite and a local folder (by default)."""
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    private_files()
    settings = get_settings(
        demo=demo, workers=workers, host=host, port=port, tls_cert=tls_cert, tls_key=tls_key
    )
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise click.UsageError("FACEGATE_TLS_CERT and FACEGATE_TLS_KEY go together")
    require_free_port(settings.host, settings.port)
    prepare_schema(settings.database_url, settings.schema_on_start)
    if settings.demo:
        click.echo(demo_banner(settings, ensure_demo(settings)))

    # The temporary files of this process (uploads being probed) are deleted at a clean
    # stop, and reclaimed by the next facegate process if this one is killed.
    app = create_app(settings, services=[process_scratch_service, *default_services()])
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        ssl_certfile=str(settings.tls_cert) if settings.tls_cert else None,
        ssl_keyfile=str(settings.tls_key) if settings.tls_key else None,
        # One process: the in-process workers and SQLite writer live here.
        workers=1,
        **UVICORN_LOGGING,
    )

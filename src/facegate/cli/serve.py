"""``facegate serve``: the embedded shape in one process (API + in-process workers)."""

from __future__ import annotations

from pathlib import Path

import click

from facegate.cli.common import cli_actor, private_files
from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.settings import Settings, get_settings
from facegate.tenancy import audited
from facegate.tenancy.schemas import KNOWN_PROCESSORS, KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

DEMO_TENANT = "demo"
# The demo plan: everything the engine offers, modest quotas.
DEMO_POLICY = PolicySpec(
    max_concurrent_jobs=2,
    allowed_processors=list(KNOWN_PROCESSORS),
    max_output_resolution="4k",
)


def create_demo_key(settings: Settings) -> str:
    """Make sure tenant ``demo`` exists and return a fresh API key of it (both audited with
    the actor cli:<os user>, like every administrative action of the CLI)."""
    engine = create_engine_from_url(settings.database_url)
    actor = cli_actor()
    try:
        with session_scope(create_session_factory(engine)) as session:
            tenant = TenancyService(session).repository.get_tenant(DEMO_TENANT)
            if tenant is None:
                spec = TenantSpec(id=DEMO_TENANT, name="Demo tenant", policy=DEMO_POLICY)
                audited.create_tenant(session, actor, spec)
            elif not tenant.is_active:
                audited.set_status(session, actor, DEMO_TENANT, "active")
            request = KeyCreate(name="demo", scopes=["jobs:write", "jobs:read", "usage:read"])
            return audited.create_key(session, actor, DEMO_TENANT, request).token
    finally:
        engine.dispose()


def demo_banner(settings: Settings, token: str) -> str:
    scheme = "https" if settings.tls_enabled else "http"
    host = "127.0.0.1" if settings.host in {"0.0.0.0", "::"} else settings.host
    base = f"{scheme}://{host}:{settings.port}"
    return "\n".join(
        [
            "",
            f"  demo tenant : {DEMO_TENANT}",
            f"  API key     : {token}   (shown once)",
            f"  API docs    : {base}/docs",
            "  try it:",
            f"    export FACEGATE_KEY={token}",
            f'    curl -H "Authorization: Bearer $FACEGATE_KEY" {base}/v1/jobs',
            f'    curl -H "Authorization: Bearer $FACEGATE_KEY" -F source=@face.jpg '
            f"-F target=@photo.jpg {base}/v1/jobs",
            "",
        ]
    )


@click.command()
@click.option(
    "--demo",
    is_flag=True,
    default=None,
    help="Create tenant 'demo' and print an API key and a curl line.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=None,
    help="In-process job workers (FACEGATE_WORKERS, default 2).",
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
    """Run the API with in-process workers on SQLite and a local folder (by default)."""
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    private_files()
    settings = get_settings(
        demo=demo, workers=workers, host=host, port=port, tls_cert=tls_cert, tls_key=tls_key
    )
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise click.UsageError("FACEGATE_TLS_CERT and FACEGATE_TLS_KEY go together")
    migrate(settings.database_url)
    if settings.demo:
        click.echo(demo_banner(settings, create_demo_key(settings)))

    import uvicorn

    from facegate.api.app import create_app

    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        ssl_certfile=str(settings.tls_cert) if settings.tls_cert else None,
        ssl_keyfile=str(settings.tls_key) if settings.tls_key else None,
        # One process: the in-process workers and SQLite writer live here.
        workers=1,
    )

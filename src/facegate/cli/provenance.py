"""``facegate provenance init`` (the installation's private CA and signing certificate) and
``facegate verify FILE`` (did this installation make it, and which job: the operator's
view, with everything an admin may see)."""

from __future__ import annotations

from pathlib import Path

import click

from facegate.cli.common import cli_actor, database_option, load_settings, transaction
from facegate.engine.errors import EngineError
from facegate.observability.audit import PROVENANCE_INIT, PROVENANCE_ROTATE, record_audit
from facegate.principal import ALL_SCOPES, Principal
from facegate.provenance.errors import ProvenanceUnavailable
from facegate.provenance.keys import (
    CA_FILE,
    CHAIN_FILE,
    KEY_FILE,
    MARK_KEY_FILE,
    create_keys,
    load_keys,
    rotate_signer,
)
from facegate.provenance.verify import verify_file

_DIR_HELP = "Where the keys live (default: FACEGATE_PROVENANCE_DIR or <data_dir>/provenance)."


@click.group()
def provenance() -> None:
    """The installation's signing identity for C2PA manifests and watermarks."""


@provenance.command("init")
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=None, help=_DIR_HELP)
@click.option("--organisation", default="facegate installation", show_default=True)
@database_option
def init(directory: Path | None, organisation: str, database_url: str | None) -> None:
    """Make a private CA and a signing certificate (for an installation without its own);
    audited as provenance.init with the actor cli:<os user>."""
    target = directory or load_settings(database_url).provenance_path
    try:
        # Inside the audit's transaction: no identity made without its event.
        with transaction(database_url) as session:
            keys = create_keys(target, organisation=organisation)
            details = {"installation_id": f"{keys.installation_id:04x}", "dir": str(target)}
            record_audit(session, cli_actor(), PROVENANCE_INIT, "provenance:keys", details)
    except FileExistsError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"signing identity written to {target}")
    click.echo(
        f"  {KEY_FILE} (secret), {CHAIN_FILE}, {CA_FILE}, {MARK_KEY_FILE} (secret), ca.key (secret)"
    )
    click.echo(f"  installation id: {keys.installation_id:04x}")


@provenance.command("rotate")
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=None, help=_DIR_HELP)
@database_option
def rotate(directory: Path | None, database_url: str | None) -> None:
    """Issue a new signing key and certificate under the same CA (key rotation); audited
    as provenance.rotate with the actor cli:<os user>."""
    target = directory or load_settings(database_url).provenance_path
    try:
        with transaction(database_url) as session:
            keys = rotate_signer(target)
            details = {"installation_id": f"{keys.installation_id:04x}", "dir": str(target)}
            record_audit(session, cli_actor(), PROVENANCE_ROTATE, "provenance:keys", details)
    except ProvenanceUnavailable as exc:
        raise click.ClickException(exc.detail) from None
    click.echo(f"new signing certificate in {target / CHAIN_FILE}")
    click.echo(f"  installation id and {MARK_KEY_FILE} unchanged: {keys.installation_id:04x}")


@click.command("verify")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--manifest",
    "sidecar",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The C2PA sidecar of a WebM result.",
)
@database_option
def verify(file: Path, sidecar: Path | None, database_url: str | None) -> None:
    """Check FILE's C2PA manifest and watermark; print JSON. Exit 0 when this installation
    made it, 1 when not, 2 on unreadable input."""
    settings = load_settings(database_url)
    operator = Principal(tenant_id="", scopes=frozenset(ALL_SCOPES), actor="cli:verify")
    try:
        keys = load_keys(settings.provenance_path)
        with transaction(database_url) as session:
            result = verify_file(
                session,
                keys,
                file.read_bytes(),
                operator,
                max_bytes=max(settings.verify_max_bytes, file.stat().st_size),
                sidecar=sidecar.read_bytes() if sidecar is not None else None,
            )
    except (EngineError, ProvenanceUnavailable) as exc:
        click.echo(f"error: {exc.detail}", err=True)
        raise SystemExit(2) from None
    click.echo(result.model_dump_json(indent=2))
    raise SystemExit(0 if result.made_by_this_installation else 1)

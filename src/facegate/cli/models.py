"""``facegate models list|verify|add``: the model store from the command line.

The store is the installation's (``FACEGATE_MODELS_DIR``, or the object storage with
``FACEGATE_MODELS_IN_STORAGE``) or ``--models-dir``; nothing is ever downloaded: ``add``
copies files an operator already has and records their sha256 in a fresh manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from facegate.cli.common import cli_actor, database_option, transaction
from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.manifest import MODEL_KINDS
from facegate.engine.modelstore.store import ModelStore
from facegate.models.installed import BUILTIN_SWAP_BACKENDS, installation_model_store
from facegate.observability.audit import MODEL_INSTALL, model_installed_details, record_audit
from facegate.settings import get_settings


def _store(models_dir: str | None) -> ModelStore:
    """``--models-dir``: that folder; else the installation's store, wherever the settings
    keep it (``FACEGATE_MODELS_IN_STORAGE``: the object storage)."""
    if models_dir is None:
        return installation_model_store(get_settings())
    return ModelStore(Path(models_dir))


models_dir_option = click.option(
    "--models-dir",
    default=None,
    help="A model folder to use instead of the installation's store (FACEGATE_MODELS_DIR, "
    "or the object storage with FACEGATE_MODELS_IN_STORAGE).",
)
tenant_option = click.option("--tenant", default=None, help="A tenant's private models.")


@click.group()
def models() -> None:
    """Inspect and install models (FaceFusion-format ONNX files, built-ins)."""


@models.command("list")
@models_dir_option
@tenant_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_models(models_dir: str | None, tenant: str | None, as_json: bool) -> None:
    """List installed models (built-in, shared, and the tenant's own), and the built-in swap
    backends that need no weights (mesh_warp)."""
    rows: list[dict[str, Any]] = [
        {
            "name": name,
            "tag": "-",
            "kind": "face_swapper",
            "owner": "builtin",
            "bytes": 0,
            "licence": "facegate (geometric, no weights)",
        }
        for name in sorted(BUILTIN_SWAP_BACKENDS)
    ]
    for version in _store(models_dir).list_models(tenant):
        owner = version.tenant or ("builtin" if version.builtin else "shared")
        rows.append({**version.to_manifest(), "owner": owner, "bytes": version.size_bytes})
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return
    line = "{:<38} {:<10} {:<20} {:<10} {:>11}  {}"
    click.echo(line.format("NAME", "TAG", "KIND", "OWNER", "SIZE", "LICENCE"))
    for row in rows:
        size = f"{row['bytes'] / 1e6:8.1f} MB"
        click.echo(
            line.format(row["name"], row["tag"], row["kind"], row["owner"], size, row["licence"])
        )


@models.command()
@models_dir_option
@tenant_option
@click.argument("names", nargs=-1)
def verify(models_dir: str | None, tenant: str | None, names: tuple[str, ...]) -> None:
    """Check every file's sha256 against its manifest; exit 1 when any fails."""
    store = _store(models_dir)
    failed = 0
    for version in store.list_models(tenant):
        if names and version.name not in names:
            continue
        try:
            store.verify(version)
            click.echo(f"ok       {version.name}:{version.tag}")
        except ModelUnavailable as exc:
            failed += 1
            click.echo(f"FAILED   {exc.detail}", err=True)
    if failed:
        raise SystemExit(1)


@models.command()
@models_dir_option
@tenant_option
@click.argument("name")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--tag", required=True, help="Version tag, e.g. v1.")
@click.option("--kind", required=True, type=click.Choice(sorted(MODEL_KINDS)))
@click.option("--licence", required=True, help="Licence of the weights, e.g. Apache-2.0.")
@click.option("--role", "roles", multiple=True, help="Role of each file (default: model).")
@click.option("--input", "input_json", default=None, help="Input spec as JSON (size, scale...).")
@database_option
def add(
    models_dir: str | None,
    tenant: str | None,
    name: str,
    files: tuple[str, ...],
    tag: str,
    kind: str,
    licence: str,
    roles: tuple[str, ...],
    input_json: str | None,
    database_url: str | None,
) -> None:
    """Copy FILES in as NAME:TAG with a manifest recording their sha256 (audited as
    ``model.install`` with the actor cli:<os user>, in the database of FACEGATE_DATABASE_URL)."""
    if roles and len(roles) != len(files):
        raise click.UsageError("give one --role per file, or none")
    role_names = roles or (
        ("model",) if len(files) == 1 else tuple(Path(f).suffix[1:] for f in files)
    )
    try:
        spec = json.loads(input_json) if input_json else None
        # The install happens inside the audit's transaction: a failed install records
        # nothing, and an install is never left without its event.
        with transaction(database_url) as session:
            version = _store(models_dir).add(
                name,
                tag,
                {role: Path(f) for role, f in zip(role_names, files, strict=True)},
                kind=kind,
                licence=licence,
                tenant=tenant,
                input_spec=spec,
            )
            record_audit(
                session,
                cli_actor(),
                MODEL_INSTALL,
                f"model:{name}:{tag}",
                model_installed_details(version),
                tenant_id=tenant,
            )
    except (ModelUnavailable, ValueError) as exc:
        raise click.ClickException(getattr(exc, "detail", str(exc))) from None
    for item in version.files:
        click.echo(f"added {name}:{tag} {item.role} {item.path.name} sha256={item.sha256}")

"""``facegate deploy overlay``: write a tenant's Kustomize overlay from its policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml
from sqlalchemy.exc import SQLAlchemyError

from facegate.database import create_engine_from_url, create_session_factory
from facegate.deploy.overlay import stored_inputs, upsert_tenant_entry, write_overlay
from facegate.deploy.policy import DeployPolicy, DeployPolicyError
from facegate.settings import get_settings
from facegate.tenancy.repository import TenancyRepository


def _stored_policy(tenant_id: str) -> tuple[str, dict[str, Any]] | None:
    """(isolation, policy values) of the tenant in the configured database, or None when the
    database has no such tenant (or no tenancy tables yet: a fresh checkout)."""
    engine = create_engine_from_url(get_settings().database_url)
    try:
        with create_session_factory(engine)() as session:
            tenant = TenancyRepository(session).get_tenant(tenant_id)
            if tenant is None:
                return None
            return tenant.isolation, tenant.policy.as_dict() if tenant.policy else {}
    except SQLAlchemyError:
        return None
    finally:
        engine.dispose()


@click.group()
def deploy() -> None:
    """Deployment helpers (Kubernetes overlays)."""


@deploy.command("overlay")
@click.option("--tenant", "tenant_id", required=True, help="Tenant id (a DNS label).")
@click.option("--isolation", type=click.Choice(["physical", "logical"]), default=None)
@click.option("--device-limit", type=click.IntRange(min=0), default=None, help="GPUs (quota).")
@click.option("--max-concurrent-jobs", type=click.IntRange(min=1), default=None)
@click.option("--storage-quota-bytes", type=click.IntRange(min=0), default=None)
@click.option(
    "--autoscaler", type=click.Choice(["hpa", "keda", "knative"]), default=None, help="[hpa]"
)
@click.option("--min-replicas", type=click.IntRange(min=0), default=None, help="[2]")
@click.option("--max-replicas", type=click.IntRange(min=1), default=None, help="[8]")
@click.option("--image", default=None, help="Container image (default: the release image).")
@click.option("--model-tag", default=None, help="MODEL_TAG for the tenant's pods.")
@click.option(
    "--warmup",
    "warmup_models",
    multiple=True,
    help="Model to preload (repeatable; --warmup '' clears the stored list).",
)
@click.option("--domain", default=None, help="Knative tenants: served at <tenant>.<domain>.")
@click.option("--data-namespace", default=None, help="Namespace of PostgreSQL/Redis/MinIO.")
@click.option("--backend-cidr", "cidrs", multiple=True, help="CIDR of a managed backend.")
@click.option("--from-flags", is_flag=True, help="Ignore the database; use the flags only.")
@click.option(
    "--k8s-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("deploy/k8s"),
    show_default=True,
    help="The directory holding the common/, worker/ and base/ kustomizations.",
)
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the tenant's directory goes [default: K8S_ROOT/tenants].",
)
@click.option(
    "--tenants-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The shared tenants.yaml the ConfigMap carries [default: K8S_ROOT/base/tenants.yaml].",
)
def overlay(
    tenant_id: str,
    from_flags: bool,
    k8s_root: Path,
    out_dir: Path | None,
    tenants_file: Path | None,
    **flags: Any,
) -> None:
    """Write TENANT's overlay: TENANT/generated/ (rewritten whole) and, the first time only,
    TENANT/kustomization.yaml (the operator's). Every value starts from the last run's
    generated/overlay-inputs.yaml; the policy numbers come from the database when the tenant
    exists there (FACEGATE_DATABASE_URL); flags given now change what they name."""
    out_dir = out_dir or k8s_root / "tenants"
    tenants_file = tenants_file or k8s_root / "base" / "tenants.yaml"
    try:
        values = stored_inputs(out_dir, tenant_id)
    except (ValueError, yaml.YAMLError) as error:
        raise click.UsageError(str(error)) from error
    values["tenant_id"] = tenant_id
    stored = None if from_flags else _stored_policy(tenant_id)
    data_namespace, cidrs = flags.pop("data_namespace"), flags.pop("cidrs")
    if data_namespace or cidrs:
        backends = dict(values.get("backends", {}))
        if data_namespace:
            backends["data_namespace"] = data_namespace
        if cidrs:
            backends["cidrs"] = list(cidrs)
        values["backends"] = backends
    explicit = {key: value for key, value in flags.items() if value not in (None, ())}
    if "warmup_models" in explicit:
        explicit["warmup_models"] = [name for name in explicit["warmup_models"] if name]
    if stored is not None:
        isolation, policy_values = stored
        click.echo(f"policy of {tenant_id!r} read from the database", err=True)
        values["isolation"] = isolation
        # The database is the source of truth for the policy numbers: a flag saying otherwise
        # is refused, never dropped in silence.
        for key in ("device_limit", "max_concurrent_jobs", "storage_quota_bytes"):
            given = explicit.pop(key, None)
            in_database = policy_values.get(key)
            if given is not None and in_database is not None and given != in_database:
                flag = "--" + key.replace("_", "-")
                raise click.UsageError(
                    f"{flag} {given} contradicts the policy of {tenant_id!r} in the database "
                    f"({key} {in_database}): change the policy (facegate tenant apply) and "
                    "re-run, or pass --from-flags to ignore the database"
                )
            if in_database is not None:
                values[key] = in_database
    values.update(explicit)
    try:
        policy = DeployPolicy.from_inputs(values)
    except (DeployPolicyError, TypeError) as error:
        raise click.UsageError(str(error)) from error
    upsert_tenant_entry(tenants_file, policy)
    click.echo(f"updated {tenants_file}")
    if policy.isolation == "logical":
        click.echo("logical tenant: shared workers, nothing else to write")
        return
    change = write_overlay(policy, out_dir, k8s_root)
    for path in change.written:
        click.echo(f"wrote {path}")
    for path in change.removed:
        click.echo(f"removed {path} (no longer generated)")
    prune = change.prune_command(policy.namespace)
    if prune:
        click.echo(
            f"objects no longer in the overlay; after applying it, remove them with: {prune}"
        )
    click.echo(f"apply with: kubectl apply -k {out_dir / tenant_id}")

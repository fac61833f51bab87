"""``facegate deploy overlay``: write a tenant's Kustomize overlay from its policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from facegate.deploy.overlay import upsert_tenant_entry, write_overlay
from facegate.deploy.policy import DeployPolicy, DeployPolicyError


def _stored_policy(tenant_id: str) -> tuple[str, dict[str, Any]] | None:
    """(isolation, policy values) of the tenant in the configured database, or None when the
    database has no such tenant (or no tenancy tables yet: a fresh checkout)."""
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError

    from facegate.database import create_engine_from_url, create_session_factory
    from facegate.settings import get_settings
    from facegate.tenancy.models import Tenant

    engine = create_engine_from_url(get_settings().database_url)
    try:
        with create_session_factory(engine)() as session:
            tenant = session.scalars(select(Tenant).where(Tenant.id == tenant_id)).first()
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
@click.option("--autoscaler", type=click.Choice(["hpa", "keda", "knative"]), default="hpa")
@click.option("--storage", type=click.Choice(["pvc", "bucket"]), default="pvc")
@click.option("--min-replicas", type=click.IntRange(min=0), default=2)
@click.option("--max-replicas", type=click.IntRange(min=1), default=8)
@click.option("--image", default=None, help="Container image (default: the release image).")
@click.option("--model-tag", default=None, help="MODEL_TAG for the tenant's pods.")
@click.option("--warmup", "warmup_models", multiple=True, help="Model to preload (repeatable).")
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
    """Write TENANT's overlay. The policy comes from the database when the tenant exists there
    (FACEGATE_DATABASE_URL), otherwise from the flags."""
    from facegate.deploy.policy import Backends

    values: dict[str, Any] = {}
    stored = None if from_flags else _stored_policy(tenant_id)
    if stored is not None:
        isolation, values = stored
        flags["isolation"] = flags["isolation"] or isolation
        click.echo(f"policy of {tenant_id!r} read from the database", err=True)
    data_namespace, cidrs = flags.pop("data_namespace"), flags.pop("cidrs")
    flags["warmup_models"] = tuple(flags["warmup_models"])
    flags["isolation"] = flags["isolation"] or "physical"
    if data_namespace or cidrs:
        flags["backends"] = Backends(data_namespace=data_namespace or "facegate-data", cidrs=cidrs)
    if stored is not None:  # the database is the source of truth for the policy numbers
        for key in ("device_limit", "max_concurrent_jobs", "storage_quota_bytes"):
            flags[key] = None
    try:
        policy = DeployPolicy.from_values(tenant_id, values, **flags)
    except DeployPolicyError as error:
        raise click.UsageError(str(error)) from error
    out_dir = out_dir or k8s_root / "tenants"
    tenants_file = tenants_file or k8s_root / "base" / "tenants.yaml"
    upsert_tenant_entry(tenants_file, policy)
    click.echo(f"updated {tenants_file}")
    if policy.isolation == "logical":
        click.echo("logical tenant: shared workers, nothing else to write")
        return
    for path in write_overlay(policy, out_dir, k8s_root):
        click.echo(f"wrote {path}")
    click.echo(f"apply with: kubectl apply -k {out_dir / tenant_id}")

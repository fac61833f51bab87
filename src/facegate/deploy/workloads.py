"""Workload objects of a physical tenant: the patch that makes the shared worker template
the tenant's own, its storage, and its autoscaler (HPA, KEDA or Knative)."""

from __future__ import annotations

from typing import Any

from facegate.deploy.objects import APP_LABELS, Manifest, gibibytes
from facegate.deploy.policy import DeployPolicy

WORKER = "facegate-worker"
SECRET = "facegate-secrets"
STORAGE_ROOT = "/var/lib/facegate/storage"

# The jobs the tenant has in flight. The tenant id is a DNS label (checked by DeployPolicy),
# so it cannot break out of the quoted literal.
QUEUE_QUERY = (
    "SELECT count(*) FROM jobs WHERE tenant_id = '{tenant}' AND status IN ('queued', 'running')"
)


def _env(name: str, value: str) -> Manifest:
    return {"name": name, "value": value}


def _secret_env(name: str, key: str) -> Manifest:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": SECRET, "key": key}}}


def tenant_env(policy: DeployPolicy) -> list[Manifest]:
    """The specification's names (TENANT_ID, OUTPUT_DIR, MODEL_TAG) plus our storage URL."""
    env = [_env("TENANT_ID", policy.tenant_id)]
    if policy.storage == "pvc":
        env += [
            _env("OUTPUT_DIR", STORAGE_ROOT),
            _env("FACEGATE_STORAGE_URL", f"file://{STORAGE_ROOT}"),
        ]
    else:  # the tenant's own bucket, e.g. s3://facegate-<tenant>?endpoint_url=...
        env.append(_secret_env("FACEGATE_STORAGE_URL", "storage-url"))
    if policy.model_tag:
        env.append(_env("MODEL_TAG", policy.model_tag))
    if policy.warmup_models:
        env.append(_env("FACEGATE_WARMUP_MODELS", ",".join(policy.warmup_models)))
    return env


def _resources(policy: DeployPolicy) -> Manifest:
    requests: dict[str, Any] = {
        "cpu": policy.worker_cpu,
        "memory": f"{policy.worker_memory_gib}Gi",
        "ephemeral-storage": "1Gi",
    }
    limits: dict[str, Any] = {
        "cpu": policy.worker_cpu_limit,
        "memory": f"{policy.worker_memory_limit_gib}Gi",
        "ephemeral-storage": "8Gi",
    }
    if policy.gpu_per_worker:
        requests["nvidia.com/gpu"] = policy.gpu_per_worker
        limits["nvidia.com/gpu"] = policy.gpu_per_worker
    return {"requests": requests, "limits": limits}


def worker_args(policy: DeployPolicy) -> list[str]:
    return [
        "worker",
        "--tenants",
        policy.tenant_id,
        "--concurrency",
        str(policy.worker_concurrency),
    ]


def _storage_volume(policy: DeployPolicy) -> tuple[list[Manifest], list[Manifest]]:
    if policy.storage != "pvc":
        return [], []
    mounts = [{"name": "storage", "mountPath": STORAGE_ROOT}]
    volumes = [{"name": "storage", "persistentVolumeClaim": {"claimName": "facegate-storage"}}]
    return mounts, volumes


def worker_patch(policy: DeployPolicy) -> Manifest:
    """Strategic-merge patch of the shared worker Deployment (lists merge by name)."""
    mounts, volumes = _storage_volume(policy)
    container: Manifest = {
        "name": "worker",
        "image": policy.image,
        "args": worker_args(policy),
        "env": tenant_env(policy),
        "resources": _resources(policy),
    }
    if mounts:
        container["volumeMounts"] = mounts
    spec: Manifest = {"containers": [container]}
    if volumes:
        spec["volumes"] = volumes
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": WORKER},
        "spec": {"replicas": policy.replica_floor, "template": {"spec": spec}},
    }


def storage_pvc(policy: DeployPolicy) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "facegate-storage", "labels": dict(APP_LABELS)},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": gibibytes(policy.storage_quota_bytes)}},
        },
    }


def _target() -> Manifest:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": WORKER}


def worker_hpa(policy: DeployPolicy) -> Manifest:
    """The plain alternative: CPU utilisation (metrics-server only), 2 -> 8 like the
    specification's peak example, capped by the tenant's devices."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": WORKER, "labels": dict(APP_LABELS)},
        "spec": {
            "scaleTargetRef": _target(),
            "minReplicas": policy.replica_floor,
            "maxReplicas": policy.replica_cap,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 70},
                    },
                }
            ],
            "behavior": {
                # Video jobs are long: scale down slowly so a lull does not kill warm workers.
                "scaleDown": {
                    "stabilizationWindowSeconds": 600,
                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
                }
            },
        },
    }


def keda_objects(policy: DeployPolicy) -> list[Manifest]:
    """KEDA scaling on queue depth: queued + running jobs of this tenant, one replica per
    ``worker_concurrency`` jobs, down to zero when ``min_replicas`` is 0."""
    auth = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "TriggerAuthentication",
        "metadata": {"name": "facegate-postgres", "labels": dict(APP_LABELS)},
        # A libpq URL (postgresql://user:pass@host:5432/db?sslmode=require): KEDA does not
        # understand SQLAlchemy's postgresql+psycopg:// scheme, hence its own key.
        "spec": {
            "secretTargetRef": [
                {"parameter": "connection", "name": SECRET, "key": "keda-postgres-dsn"}
            ]
        },
    }
    scaled = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": WORKER, "labels": dict(APP_LABELS)},
        "spec": {
            "scaleTargetRef": {"name": WORKER},
            "minReplicaCount": policy.replica_floor,
            "maxReplicaCount": policy.replica_cap,
            "pollingInterval": 15,
            "cooldownPeriod": 600,
            "triggers": [
                {
                    "type": "postgresql",
                    "metadata": {
                        "query": QUEUE_QUERY.format(tenant=policy.tenant_id),
                        "targetQueryValue": str(policy.worker_concurrency),
                        "activationTargetQueryValue": "0",
                    },
                    "authenticationRef": {"name": "facegate-postgres"},
                }
            ],
        },
    }
    return [auth, scaled]

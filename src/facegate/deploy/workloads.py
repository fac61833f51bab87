"""Workload objects of a physical tenant: the patch that makes the shared worker template
the tenant's own (its tenant, concurrency, GPU, image variant and nodes) and its autoscaler
(HPA, KEDA or Knative). Storage is the installation's one S3 store (``storage-url`` of the
namespace's ``facegate-secrets``, the same as the api's), never a volume of the tenant."""

from __future__ import annotations

from typing import Any

from facegate.deploy.objects import APP_LABELS, Manifest
from facegate.deploy.policy import DeployPolicy

WORKER = "facegate-worker"
SECRET = "facegate-secrets"

# The jobs the tenant has in flight. The tenant id is a DNS label (checked by DeployPolicy),
# so it cannot break out of the quoted literal.
QUEUE_QUERY = (
    "SELECT count(*) FROM jobs WHERE tenant_id = '{tenant}' AND status IN ('queued', 'running')"
)


def _env(name: str, value: str) -> Manifest:
    return {"name": name, "value": value}


def _secret_env(name: str, key: str, *, optional: bool = False) -> Manifest:
    reference: Manifest = {"name": SECRET, "key": key}
    if optional:
        reference["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": reference}}


def storage_env() -> list[Manifest]:
    """The shared store every facegate pod uses: the URL and the S3 credentials from the
    namespace's Secret (both keys optional: a workload identity, e.g. an IAM role on the
    ServiceAccount, supplies credentials without them)."""
    return [
        _secret_env("FACEGATE_STORAGE_URL", "storage-url"),
        _secret_env("AWS_ACCESS_KEY_ID", "aws-access-key-id", optional=True),
        _secret_env("AWS_SECRET_ACCESS_KEY", "aws-secret-access-key", optional=True),
    ]


def tenant_env(policy: DeployPolicy) -> list[Manifest]:
    """The specification's names (TENANT_ID, MODEL_TAG) and the warm-up list."""
    env = [_env("TENANT_ID", policy.tenant_id)]
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
        "ephemeral-storage": "28Gi",  # /tmp (8Gi) and the model cache (20Gi) emptyDirs
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


def gpu_scheduling(policy: DeployPolicy) -> Manifest:
    """Pod spec fields that put a GPU worker on a GPU node (none for CPU workers)."""
    if not policy.gpu_per_worker:
        return {}
    return {
        "nodeSelector": dict(policy.gpu_node_selector),
        "tolerations": [
            {"key": key, "operator": "Exists", "effect": "NoSchedule"}
            for key in policy.gpu_tolerations
        ],
    }


def worker_patch(policy: DeployPolicy) -> Manifest:
    """Strategic-merge patch of the shared worker Deployment (lists merge by name)."""
    container: Manifest = {
        "name": "worker",
        "image": policy.worker_image,
        "args": worker_args(policy),
        "env": tenant_env(policy),
        "resources": _resources(policy),
    }
    spec: Manifest = {"containers": [container], **gpu_scheduling(policy)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": WORKER},
        "spec": {"replicas": policy.replica_floor, "template": {"spec": spec}},
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

"""The Knative variant for rarely used tenants: one ``facegate serve`` (API + in-process
workers serving only this tenant) that scales to zero and wakes on the next request.

Written for a default Knative Serving install (its ``config-features`` as shipped): no
pod-level ``securityContext`` (``kubernetes.podspec-securitycontext`` is disabled; every field
we need is allowed on the container), no PersistentVolumeClaim
(``kubernetes.podspec-persistent-volume-claim`` is disabled; the models come from the object
storage like every pod's, cached in an ``emptyDir``), no
nodeSelector/tolerations (disabled as well; the ``nvidia.com/gpu`` request alone places a GPU
revision), ``emptyDir`` for the writable folders (enabled). A DomainMapping routes the
tenant's host name to it through Knative's ingress.
"""

from __future__ import annotations

from facegate.deploy.objects import APP_LABELS, HTTP_PORT, Manifest
from facegate.deploy.policy import DeployPolicy
from facegate.deploy.workloads import SECRET, storage_env, tenant_env

# The same two justified checkov skips as the Deployments (deploy/k8s/worker): releases pin
# the image digest in the overlay; settings are FACEGATE_* environment variables by design.
CHECKOV_SKIPS = {
    "checkov.io/skip1": "CKV_K8S_43=release pins the image digest in the overlay",
    "checkov.io/skip2": "CKV_K8S_35=settings are environment variables by design",
    # A default Knative install refuses a pod-level securityContext (its
    # kubernetes.podspec-securitycontext flag is off): the container carries every field.
    "checkov.io/skip3": "CKV_K8S_29=Knative refuses pod securityContext; the container sets it",
}

CONTAINER_SECURITY: Manifest = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "runAsGroup": 10001,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


PROVENANCE_DIR = "/etc/facegate/provenance"
PROVENANCE_FILES = ("signer.key", "signer.pem", "ca.pem", "mark.key")


def _probe(path: str) -> Manifest:
    # Knative rewrites probes to its queue-proxy; the port, if given, must be the container's.
    return {"httpGet": {"path": path, "port": HTTP_PORT}, "periodSeconds": 10, "timeoutSeconds": 3}


def knative_service(policy: DeployPolicy) -> Manifest:
    """A ``serving.knative.dev/v1`` Service. ``scale-down-delay`` keeps the pod up after the
    last request so a job accepted just before finishes while the client polls for it; the
    warm-up list (``FACEGATE_WARMUP_MODELS``) loads the usual models during the cold start,
    before readiness lets the first request in."""
    env = [
        {"name": "FACEGATE_HOST", "value": "0.0.0.0"},
        {"name": "FACEGATE_PORT", "value": str(HTTP_PORT)},
        {"name": "FACEGATE_DATA_DIR", "value": "/var/lib/facegate"},
        {"name": "FACEGATE_PROVENANCE_DIR", "value": PROVENANCE_DIR},
        {"name": "PROMETHEUS_MULTIPROC_DIR", "value": "/tmp/metrics"},
        {"name": "FACEGATE_SCHEMA_ON_START", "value": "check"},
        {
            "name": "FACEGATE_DATABASE_URL",
            "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "database-url"}},
        },
        *storage_env(),
        *tenant_env(policy),
    ]
    resources: Manifest = {
        "requests": {"cpu": policy.worker_cpu, "memory": f"{policy.worker_memory_gib}Gi"},
        "limits": {"cpu": policy.worker_cpu_limit, "memory": f"{policy.worker_memory_limit_gib}Gi"},
    }
    if policy.gpu_per_worker:
        resources["requests"]["nvidia.com/gpu"] = policy.gpu_per_worker
        resources["limits"]["nvidia.com/gpu"] = policy.gpu_per_worker
    mounts = [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "data", "mountPath": "/var/lib/facegate"},
        {"name": "provenance", "mountPath": PROVENANCE_DIR, "readOnly": True},
    ]
    # The installation's models from the object storage, cached in an emptyDir.
    env += [
        {"name": "FACEGATE_MODELS_IN_STORAGE", "value": "true"},
        {"name": "FACEGATE_MODELS_DIR", "value": "/models"},
        {"name": "MODEL_PATH", "value": "/models"},
    ]
    mounts.append({"name": "models", "mountPath": "/models"})
    volumes: list[Manifest] = [
        {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}},
        {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
        {
            # The installation's signing identity (docs/provenance.md): `serve` runs workers,
            # which sign every result and do not start without it. World-readable inside the
            # pod: without a pod securityContext there is no fsGroup to give it to.
            "name": "provenance",
            "secret": {
                "secretName": "facegate-provenance",
                "defaultMode": 0o444,
                "items": [{"key": name, "path": name} for name in PROVENANCE_FILES],
            },
        },
    ]
    volumes.append({"name": "models", "emptyDir": {"sizeLimit": "20Gi"}})
    annotations = {
        "autoscaling.knative.dev/min-scale": str(min(policy.min_replicas, policy.replica_cap)),
        "autoscaling.knative.dev/max-scale": str(policy.replica_cap),
        "autoscaling.knative.dev/scale-down-delay": "10m",
        "autoscaling.knative.dev/target": str(policy.worker_concurrency * 4),
    }
    return {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {
            "name": "facegate",
            "labels": dict(APP_LABELS),
            "annotations": dict(CHECKOV_SKIPS),
        },
        "spec": {
            "template": {
                "metadata": {
                    "labels": {**APP_LABELS, "app.kubernetes.io/component": "serverless"},
                    "annotations": annotations,
                },
                "spec": {
                    "serviceAccountName": "facegate",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "timeoutSeconds": 600,
                    "containers": [
                        {
                            "name": "facegate",
                            "image": policy.worker_image,
                            "imagePullPolicy": "Always",
                            "args": ["serve"],
                            "ports": [{"name": "http1", "containerPort": HTTP_PORT}],
                            "env": env,
                            "livenessProbe": _probe("/healthz"),
                            "readinessProbe": _probe("/readyz"),
                            "resources": resources,
                            "securityContext": dict(CONTAINER_SECURITY),
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            }
        },
    }


def domain_mapping(policy: DeployPolicy) -> Manifest:
    """Routes ``policy.knative_host`` to the tenant's Knative Service (Knative's ingress;
    DomainMapping is on by default). Point that name's DNS at the Knative ingress."""
    return {
        "apiVersion": "serving.knative.dev/v1beta1",
        "kind": "DomainMapping",
        "metadata": {"name": policy.knative_host, "labels": dict(APP_LABELS)},
        "spec": {
            "ref": {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "name": "facegate"}
        },
    }

"""Namespace-level objects of a physical tenant: the namespace itself, its quota and its
network policies. These carry the isolation, so tests assert on them directly."""

from __future__ import annotations

from typing import Any

from facegate.deploy.policy import GIB, DeployPolicy

Manifest = dict[str, Any]

# Every facegate process listens here: the api for requests, a worker for /healthz, /readyz
# and /metrics only.
HTTP_PORT = 8000
# Knative's queue-proxy beside the app: requests (http1, h2c) from the activator and the
# ingress, and the autoscaling and user metrics the autoscaler scrapes (Knative's reserved
# ports).
KNATIVE_REQUEST_PORTS = (8012, 8013)
KNATIVE_METRICS_PORTS = (9090, 9091)
# Knative keeps old revisions (config-gc: min-non-active-revisions 20 by default), each with
# a Deployment and two Services, plus the route's Service: the quota must hold them.
KNATIVE_RETAINED_REVISIONS = 21

APP_LABELS = {"app.kubernetes.io/name": "facegate", "app.kubernetes.io/part-of": "facegate"}
# Pod Security Admission: every mode at `restricted`, pinned to `latest`, so a pod that
# would run as root or keep a capability is refused at admission, not only flagged.
POD_SECURITY = {
    f"pod-security.kubernetes.io/{mode}{suffix}": value
    for mode in ("enforce", "audit", "warn")
    for suffix, value in (("", "restricted"), ("-version", "latest"))
}


def gibibytes(size: int) -> str:
    """A byte count as a Kubernetes quantity in whole Gi, rounded up, at least 1Gi."""
    return f"{max(1, -(-size // GIB))}Gi"


def _meta(name: str, policy: DeployPolicy, **labels: str) -> Manifest:
    return {
        "name": name,
        "labels": {**APP_LABELS, "facegate.io/tenant": policy.tenant_id, **labels},
    }


def namespace(policy: DeployPolicy) -> Manifest:
    meta = _meta(policy.namespace, policy, **POD_SECURITY)
    meta["labels"]["facegate.io/isolation"] = policy.isolation
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _times(quantity: str, factor: int) -> str:
    number = quantity.rstrip("m")
    return f"{int(number) * factor}m" if quantity.endswith("m") else str(int(number) * factor)


def resource_quota(policy: DeployPolicy) -> Manifest:
    """Hard caps for the namespace. The GPU line is the tenant's device_limit exactly; cpu and
    memory allow every replica the autoscaler may add plus one surge pod of a rollout."""
    pods = policy.replica_cap + 1
    knative = policy.autoscaler == "knative"
    hard = {
        "requests.cpu": _times(policy.worker_cpu, pods),
        "limits.cpu": _times(policy.worker_cpu_limit, pods),
        "requests.memory": f"{policy.worker_memory_gib * pods}Gi",
        "limits.memory": f"{policy.worker_memory_limit_gib * pods}Gi",
        "requests.nvidia.com/gpu": str(policy.device_limit),
        # No volumes: files live in the object storage (the tenant's storage quota is the
        # service's), scratch space and the model cache in emptyDirs.
        "requests.storage": "0",
        "persistentvolumeclaims": "0",
        "pods": str(pods + 1),
        "services": str(1 + 2 * KNATIVE_RETAINED_REVISIONS) if knative else "2",
        "services.loadbalancers": "0",
        "services.nodeports": "0",
        "configmaps": "10",
        "secrets": "10",
        "count/deployments.apps": str(KNATIVE_RETAINED_REVISIONS) if knative else "2",
    }
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": _meta("facegate-quota", policy),
        "spec": {"hard": hard},
    }


def _policy(name: str, policy: DeployPolicy, spec: Manifest) -> Manifest:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(name, policy),
        "spec": spec,
    }


def _namespace_peer(name: str) -> Manifest:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}


def network_policies(policy: DeployPolicy) -> list[Manifest]:
    """Default deny both ways, then exactly: DNS, the data services, the gateway (HTTP in)
    and Prometheus (metrics in). Nothing reaches another tenant's namespace."""
    all_pods: Manifest = {}
    deny = _policy(
        "default-deny", policy, {"podSelector": all_pods, "policyTypes": ["Ingress", "Egress"]}
    )
    dns = _policy(
        "allow-dns",
        policy,
        {
            "podSelector": all_pods,
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [
                        {
                            **_namespace_peer("kube-system"),
                            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                        }
                    ],
                    "ports": [{"protocol": p, "port": 53} for p in ("UDP", "TCP")],
                }
            ],
        },
    )
    backends = policy.backends
    peers: list[Manifest] = [_namespace_peer(backends.data_namespace)]
    peers += [{"ipBlock": {"cidr": cidr}} for cidr in backends.cidrs]
    ports = [backends.postgres_port, backends.redis_port, *backends.s3_ports]
    data = _policy(
        "allow-egress-data",
        policy,
        {
            "podSelector": all_pods,
            "policyTypes": ["Egress"],
            "egress": [
                {"to": peers, "ports": [{"protocol": "TCP", "port": port} for port in ports]}
            ],
        },
    )

    def tcp(*ports: int) -> list[Manifest]:
        return [{"protocol": "TCP", "port": port} for port in ports]

    if policy.autoscaler == "knative":
        # Requests reach the queue-proxy from the activator (knative-serving, while scaled to
        # zero or buffering) or straight from Knative's ingress; the autoscaler scrapes it.
        rules = [
            {
                "from": [_namespace_peer(policy.knative_namespace)],
                "ports": tcp(*KNATIVE_REQUEST_PORTS, *KNATIVE_METRICS_PORTS),
            },
            {
                "from": [_namespace_peer(policy.knative_gateway_namespace)],
                "ports": tcp(*KNATIVE_REQUEST_PORTS),
            },
        ]
    else:
        rules = [{"from": [_namespace_peer(policy.gateway_namespace)], "ports": tcp(HTTP_PORT)}]
    rules.append({"from": [_namespace_peer(policy.monitoring_namespace)], "ports": tcp(HTTP_PORT)})
    ingress = _policy(
        "allow-ingress-gateway",
        policy,
        {"podSelector": {"matchLabels": APP_LABELS}, "policyTypes": ["Ingress"], "ingress": rules},
    )
    return [deny, dns, data, ingress]

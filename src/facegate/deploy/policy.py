"""What an overlay is rendered from: a tenant's deployment policy as plain data."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

Isolation = Literal["logical", "physical"]
Autoscaler = Literal["hpa", "keda", "knative"]

_DNS_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
NAMESPACE_PREFIX = "facegate-"
GIB = 1024**3


class DeployPolicyError(ValueError):
    """The policy cannot be deployed as asked (bad id, impossible numbers)."""


# Inputs a stored overlay-inputs.yaml may hold that shape no overlay (the size of a models
# volume and a Knative models PVC; models live in the object storage, cached in an emptyDir):
# dropped when the file is read, absent from the file it is rewritten to.
RETIRED_INPUTS = frozenset({"models_bytes", "knative_models_pvc"})


@dataclass(frozen=True)
class Backends:
    """Where the data services are, for the egress NetworkPolicy of a tenant namespace.

    In-cluster services are reached by namespace (``data_namespace``); managed ones outside
    the cluster (RDS, ElastiCache, S3 endpoints) by CIDR. Both may be given.
    """

    data_namespace: str = "facegate-data"
    postgres_port: int = 5432
    redis_port: int = 6379
    s3_ports: tuple[int, ...] = (443, 9000)
    cidrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeployPolicy:
    """A tenant's policy as far as deployment is concerned.

    ``device_limit`` becomes the namespace's ``requests.nvidia.com/gpu`` quota and caps the
    worker replicas (one device per worker pod); 0 means CPU-only workers and a zero GPU
    quota. ``max_concurrent_jobs`` is split over the replicas as ``--concurrency``.
    """

    tenant_id: str
    isolation: Isolation = "physical"
    device_limit: int = 1
    max_concurrent_jobs: int = 2
    storage_quota_bytes: int = 10 * GIB
    worker_cpu: str = "2"
    worker_cpu_limit: str = "4"
    worker_memory_gib: int = 4
    worker_memory_limit_gib: int = 8
    min_replicas: int = 2
    max_replicas: int = 8
    autoscaler: Autoscaler = "hpa"
    gateway_namespace: str = "ingress-nginx"
    # Knative tenants: Knative's own namespace (activator, autoscaler), its ingress's
    # namespace (Kourier by default) and the host name their DomainMapping routes.
    knative_namespace: str = "knative-serving"
    knative_gateway_namespace: str = "kourier-system"
    domain: str = "facegate.example.com"
    monitoring_namespace: str = "monitoring"
    image: str = "ghcr.io/facegate/facegate:0.1.0"
    # GPU workers: the image's cuda variant (onnxruntime-gpu), and the nodes that have GPUs
    # (NVIDIA GPU feature discovery's label; the taint GPU node pools usually carry).
    gpu_image_suffix: str = "-cuda"
    gpu_node_selector: tuple[tuple[str, str], ...] = (("nvidia.com/gpu.present", "true"),)
    gpu_tolerations: tuple[str, ...] = ("nvidia.com/gpu",)
    model_tag: str = ""
    warmup_models: tuple[str, ...] = ()
    backends: Backends = field(default_factory=Backends)

    def __post_init__(self) -> None:
        if not _DNS_LABEL.match(self.tenant_id):
            raise DeployPolicyError(f"tenant id {self.tenant_id!r} is not a DNS label")
        if len(self.namespace) > 63:
            raise DeployPolicyError(
                f"namespace {self.namespace!r} is longer than 63 characters; "
                f"tenant ids of physical tenants are limited to {63 - len(NAMESPACE_PREFIX)}"
            )
        if self.isolation not in ("logical", "physical"):
            raise DeployPolicyError(f"unknown isolation {self.isolation!r}")
        if self.autoscaler not in ("hpa", "keda", "knative"):
            raise DeployPolicyError(f"unknown autoscaler {self.autoscaler!r}")
        for name in ("device_limit", "storage_quota_bytes"):
            if getattr(self, name) < 0:
                raise DeployPolicyError(f"{name} must be >= 0")
        if self.max_concurrent_jobs < 1:
            raise DeployPolicyError("max_concurrent_jobs must be >= 1")
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise DeployPolicyError("replicas must satisfy 0 <= min <= max and max >= 1")
        name, _, tag = self.image.rpartition(":")
        if "@" not in self.image and (not name or "/" in tag):
            raise DeployPolicyError(f"image {self.image!r} needs a tag or a digest")
        if self.worker_memory_limit_gib < self.worker_memory_gib:
            raise DeployPolicyError("worker memory limit is below its request")

    @property
    def namespace(self) -> str:
        return NAMESPACE_PREFIX + self.tenant_id

    @property
    def knative_host(self) -> str:
        return f"{self.tenant_id}.{self.domain}"

    @property
    def replica_cap(self) -> int:
        """The most worker pods the namespace can hold: each GPU worker takes one device."""
        if self.device_limit > 0:
            return min(self.max_replicas, self.device_limit)
        return self.max_replicas

    @property
    def replica_floor(self) -> int:
        floor = 0 if self.autoscaler in ("keda", "knative") and self.min_replicas == 0 else 1
        return max(floor, min(self.min_replicas, self.replica_cap))

    @property
    def worker_concurrency(self) -> int:
        """Jobs one worker pod runs at once, so that all replicas together honour the policy."""
        return max(1, -(-self.max_concurrent_jobs // self.replica_cap))

    @property
    def gpu_per_worker(self) -> int:
        return 1 if self.device_limit > 0 else 0

    @property
    def worker_image(self) -> str:
        """The image of the tenant's pods: the cuda variant (tag suffix) for GPU workers."""
        if not self.gpu_per_worker or not self.gpu_image_suffix:
            return self.image
        if "@" in self.image:  # a digest names one variant already: the operator's choice
            return self.image
        tag = self.image.rpartition(":")[2]
        return (
            self.image
            if tag.endswith(self.gpu_image_suffix)
            else self.image + self.gpu_image_suffix
        )

    def inputs(self) -> dict[str, Any]:
        """Every value this policy was built from, as plain data (``overlay-inputs.yaml``):
        :meth:`from_inputs` of it is this policy again."""
        values = asdict(self)
        values["warmup_models"] = list(self.warmup_models)
        values["gpu_node_selector"] = dict(self.gpu_node_selector)
        values["gpu_tolerations"] = list(self.gpu_tolerations)
        values["backends"] = {**values["backends"], "s3_ports": list(self.backends.s3_ports),
                              "cidrs": list(self.backends.cidrs)}  # fmt: skip
        return values

    @classmethod
    def from_inputs(cls, values: dict[str, Any]) -> DeployPolicy:
        """The policy :meth:`inputs` described; unknown keys are an error (a typo in the
        stored file must not be dropped silently)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in values.items() if k not in RETIRED_INPUTS}
        unknown = set(values) - known
        if unknown:
            raise DeployPolicyError(f"unknown overlay inputs: {', '.join(sorted(unknown))}")
        data = dict(values)
        if "backends" in data:
            backends = dict(data["backends"])
            for key in ("s3_ports", "cidrs"):
                if key in backends:
                    backends[key] = tuple(backends[key])
            data["backends"] = Backends(**backends)
        if "gpu_node_selector" in data:
            data["gpu_node_selector"] = tuple(sorted(dict(data["gpu_node_selector"]).items()))
        for key in ("warmup_models", "gpu_tolerations"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)

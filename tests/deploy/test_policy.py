"""DeployPolicy arithmetic: replicas capped by devices, concurrency split over replicas."""

from __future__ import annotations

import pytest
import yaml

from facegate.deploy.objects import resource_quota
from facegate.deploy.policy import Backends, DeployPolicy, DeployPolicyError


def test_gpu_workers_never_outnumber_the_tenants_devices() -> None:
    policy = DeployPolicy("studio", device_limit=3, min_replicas=2, max_replicas=8)
    assert policy.replica_cap == 3
    assert policy.replica_floor == 2
    assert policy.gpu_per_worker == 1


def test_cpu_only_tenant_scales_to_max_replicas_without_gpus() -> None:
    policy = DeployPolicy("cpu-only", device_limit=0, max_replicas=5)
    assert (policy.replica_cap, policy.gpu_per_worker) == (5, 0)
    assert resource_quota(policy)["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"


def test_concurrency_is_split_so_all_replicas_honour_the_policy() -> None:
    policy = DeployPolicy("t", device_limit=2, max_concurrent_jobs=5)
    assert policy.worker_concurrency == 3  # 2 replicas x 3 >= 5, never fewer slots than asked


def test_scale_to_zero_only_with_keda_or_knative() -> None:
    assert DeployPolicy("t", min_replicas=0, autoscaler="keda").replica_floor == 0
    assert DeployPolicy("t", min_replicas=0, autoscaler="hpa").replica_floor == 1


def test_quota_covers_every_replica_plus_one_surge() -> None:
    hard = resource_quota(DeployPolicy("t", device_limit=2, worker_cpu="2"))["spec"]["hard"]
    assert hard["requests.cpu"] == "6"
    assert hard["requests.memory"] == "12Gi"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tenant_id": "Bad_Id"},
        {"tenant_id": "x" * 60},  # facegate-<id> would exceed a namespace name
        {"tenant_id": "t", "device_limit": -1},
        {"tenant_id": "t", "min_replicas": 5, "max_replicas": 2},
        {"tenant_id": "t", "max_concurrent_jobs": 0},
        {"tenant_id": "t", "autoscaler": "cron"},
    ],
)
def test_impossible_policies_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(DeployPolicyError):
        DeployPolicy(**kwargs)  # type: ignore[arg-type]


def test_inputs_round_trip_to_the_same_policy() -> None:
    policy = DeployPolicy(
        "t", device_limit=2, autoscaler="keda", warmup_models=("face_swapper",),
        backends=Backends(cidrs=("10.1.0.0/16",)), model_tag="v2",
    )  # fmt: skip
    stored = yaml.safe_load(yaml.safe_dump(policy.inputs()))
    assert DeployPolicy.from_inputs(stored) == policy
    with pytest.raises(DeployPolicyError, match="unknown overlay inputs: autoscalr"):
        DeployPolicy.from_inputs({**stored, "autoscalr": "hpa"})


def test_gpu_workers_get_the_cuda_variant_of_the_image() -> None:
    assert DeployPolicy("t", device_limit=1).worker_image == "ghcr.io/facegate/facegate:0.1.0-cuda"
    assert DeployPolicy("t", device_limit=0).worker_image == "ghcr.io/facegate/facegate:0.1.0"
    pinned = "registry.example.com:5000/facegate@sha256:" + "a" * 64
    assert DeployPolicy("t", device_limit=1, image=pinned).worker_image == pinned
    with pytest.raises(DeployPolicyError, match="needs a tag or a digest"):
        DeployPolicy("t", image="registry.example.com:5000/facegate")

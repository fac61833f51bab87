"""Physical isolation, asserted on the rendered objects: each tenant namespace denies all
traffic by default, caps GPUs at its policy, enforces the restricted Pod Security level and
runs workers that serve only that tenant. Overlays come from `facegate deploy overlay`."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from deploy_tools import K8S, kustomize, overlays, pod_specs

from facegate.cli import main

Docs = list[dict[str, Any]]


def _tenant_entries(k8s_root: Path) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((k8s_root / "base" / "tenants.yaml").read_text())
    return {entry["id"]: entry for entry in data["tenants"]}


def assert_isolated(tenant: str, documents: Docs, device_limit: int) -> None:
    namespace = f"facegate-{tenant}"
    (ns,) = [d for d in documents if d["kind"] == "Namespace"]
    assert ns["metadata"]["name"] == namespace
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert {d["metadata"].get("namespace") for d in documents if d["kind"] != "Namespace"} == {
        namespace
    }
    policies = [d for d in documents if d["kind"] == "NetworkPolicy"]
    deny = [
        p for p in policies
        if p["spec"]["podSelector"] == {}
        and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress") and not p["spec"].get("egress")
    ]  # fmt: skip
    assert deny, "no default-deny ingress+egress policy"
    for policy in policies:  # nothing allows traffic from or to another tenant's namespace
        for rule in policy["spec"].get("ingress", []) + policy["spec"].get("egress", []):
            peers = rule.get("from", []) + rule.get("to", [])
            assert peers, f"{policy['metadata']['name']} allows everyone"
            for peer in peers:
                names = peer.get("namespaceSelector", {}).get("matchLabels", {}).values()
                assert not any(
                    str(n).startswith("facegate-") and n != "facegate-data" for n in names
                )
    (quota,) = [d for d in documents if d["kind"] == "ResourceQuota"]
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == str(device_limit)
    workloads = [d for d in documents if pod_specs(d)]
    assert workloads
    for workload in workloads:
        (spec,) = pod_specs(workload)
        (container,) = spec["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["TENANT_ID"] == tenant
        if workload["kind"] == "Deployment":
            args = container["args"]
            assert args[:3] == ["worker", "--tenants", tenant], args
            gpus = container["resources"]["limits"].get("nvidia.com/gpu", 0)
            assert gpus == (1 if device_limit else 0)


@pytest.mark.parametrize("overlay", [p for p in overlays() if p.name != "logical"], ids=str)
def test_every_committed_tenant_overlay_is_isolated(overlay: Path) -> None:
    entry = _tenant_entries(K8S)[overlay.name]
    assert entry["isolation"] == "physical"
    assert_isolated(overlay.name, kustomize(overlay), entry["policy"]["device_limit"])


@pytest.fixture
def k8s_copy(tmp_path: Path) -> Path:
    root = tmp_path / "k8s"
    shutil.copytree(K8S, root, ignore=shutil.ignore_patterns("tenants"))
    return root


def _overlay(k8s_root: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["deploy", "overlay", "--k8s-root", str(k8s_root), *args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("autoscaler", ["hpa", "keda", "knative"])
def test_one_command_adds_an_isolated_tenant(k8s_copy: Path, autoscaler: str) -> None:
    _overlay(
        k8s_copy, "--tenant", "new-studio", "--from-flags", "--device-limit", "3",
        "--autoscaler", autoscaler,
    )  # fmt: skip
    documents = kustomize(k8s_copy / "tenants" / "new-studio")
    assert_isolated("new-studio", documents, 3)
    assert _tenant_entries(k8s_copy)["new-studio"]["isolation"] == "physical"
    assert kustomize(k8s_copy / "logical")  # the shared ConfigMap still renders with it
    if autoscaler == "keda":
        (scaled,) = [d for d in documents if d["kind"] == "ScaledObject"]
        (trigger,) = scaled["spec"]["triggers"]
        assert trigger["type"] == "postgresql"
        assert "tenant_id = 'new-studio'" in trigger["metadata"]["query"]
        assert "status IN ('queued', 'running')" in trigger["metadata"]["query"]
        assert scaled["spec"]["maxReplicaCount"] == 3
    if autoscaler == "hpa":
        (hpa,) = [d for d in documents if d["kind"] == "HorizontalPodAutoscaler"]
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 3)


def test_logical_tenant_is_only_a_tenants_yaml_entry(k8s_copy: Path) -> None:
    output = _overlay(k8s_copy, "--tenant", "small", "--from-flags", "--isolation", "logical")
    assert "nothing else to write" in output
    assert not (k8s_copy / "tenants" / "small").exists()
    (config,) = [d for d in kustomize(k8s_copy / "logical") if d["kind"] == "ConfigMap"]
    entries = yaml.safe_load(config["data"]["tenants.yaml"])["tenants"]
    assert {"id": "small"}.items() <= next(e for e in entries if e["id"] == "small").items()


def test_policy_is_read_from_the_database_when_the_tenant_exists(
    k8s_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from facegate.database import (
        create_engine_from_url,
        create_session_factory,
        migrate,
        session_scope,
    )
    from facegate.tenancy.tables import Policy, Tenant

    url = f"sqlite:///{tmp_path}/facegate.db"
    migrate(url)
    engine = create_engine_from_url(url)
    with session_scope(create_session_factory(engine)) as session:
        tenant = Tenant(id="db-studio", name="DB studio", isolation="physical")
        tenant.policy = Policy(device_limit=5, max_concurrent_jobs=7)
        session.add(tenant)
    engine.dispose()
    monkeypatch.setenv("FACEGATE_DATABASE_URL", url)
    # the flag says 1 GPU, the database (the source of truth) says 5: refused, naming both
    args = ["deploy", "overlay", "--k8s-root", str(k8s_copy), "--tenant", "db-studio"]
    refused = CliRunner().invoke(main, [*args, "--device-limit", "1"])
    assert refused.exit_code == 2
    assert "--device-limit 1 contradicts" in refused.output
    assert "(device_limit 5)" in refused.output
    _overlay(k8s_copy, "--tenant", "db-studio")
    documents = kustomize(k8s_copy / "tenants" / "db-studio")
    assert_isolated("db-studio", documents, 5)
    # an unknown tenant falls back to the flags
    _overlay(k8s_copy, "--tenant", "flag-studio", "--device-limit", "1")
    assert_isolated("flag-studio", kustomize(k8s_copy / "tenants" / "flag-studio"), 1)


def test_isolation_check_fails_on_a_leaky_namespace(k8s_copy: Path) -> None:
    _overlay(k8s_copy, "--tenant", "leaky", "--from-flags", "--device-limit", "2")
    documents = [d for d in kustomize(k8s_copy / "tenants" / "leaky")
                 if d["metadata"]["name"] != "default-deny"]  # fmt: skip
    with pytest.raises(AssertionError, match="default-deny"):
        assert_isolated("leaky", documents, 2)
    with pytest.raises(AssertionError):
        assert_isolated("leaky", kustomize(k8s_copy / "tenants" / "leaky"), 1)


def test_regeneration_keeps_operator_edits_applies_the_change_and_reports_stale_objects(
    k8s_copy: Path,
) -> None:
    tenant = k8s_copy / "tenants" / "rt"
    _overlay(
        k8s_copy, "--tenant", "rt", "--from-flags", "--device-limit", "2",
        "--autoscaler", "keda", "--model-tag", "v2", "--warmup", "face_swapper",
    )  # fmt: skip
    assert (tenant / "generated" / "keda.yaml").exists()
    # The operator pins the image digest and adds a patch of their own.
    digest = "sha256:" + "0" * 64
    operator = tenant / "kustomization.yaml"
    operator.write_text(
        operator.read_text()
        + f"images:\n  - name: ghcr.io/facegate/facegate\n    digest: {digest}\n"
        + "patches:\n  - target: {kind: Deployment, name: facegate-worker}\n"
        + "    patch: |-\n      - op: add\n        path: /metadata/annotations/owner\n"
        + "        value: team-video\n"
    )
    edited = operator.read_text()
    # The policy changes: one GPU, plain HPA; nothing else is repeated on the command line.
    output = _overlay(
        k8s_copy, "--tenant", "rt", "--from-flags", "--device-limit", "1", "--autoscaler", "hpa"
    )
    assert operator.read_text() == edited
    assert sorted(p.name for p in (tenant / "generated").iterdir()) == [
        "hpa.yaml", "kustomization.yaml", "namespace.yaml", "networkpolicy.yaml",
        "overlay-inputs.yaml", "quota.yaml", "worker-patch.yaml",
    ]  # fmt: skip
    assert (
        "kubectl -n facegate-rt delete scaledobject/facegate-worker "
        "triggerauthentication/facegate-postgres" in output
    )
    documents = kustomize(tenant)
    assert_isolated("rt", documents, 1)
    kinds = {d["kind"] for d in documents}
    assert "HorizontalPodAutoscaler" in kinds
    assert not kinds & {"ScaledObject", "TriggerAuthentication"}
    (worker,) = [d for d in documents if d["kind"] == "Deployment"]
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"ghcr.io/facegate/facegate@{digest}"
    assert worker["metadata"]["annotations"]["owner"] == "team-video"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["MODEL_TAG"], env["FACEGATE_WARMUP_MODELS"]) == ("v2", "face_swapper")
    # The same command again reproduces the same files (its inputs are stored).
    before = {p.name: p.read_text() for p in (tenant / "generated").iterdir()}
    assert "no longer" not in _overlay(k8s_copy, "--tenant", "rt", "--from-flags")
    assert {p.name: p.read_text() for p in (tenant / "generated").iterdir()} == before


def test_knative_pods_take_their_models_from_the_object_storage(k8s_copy: Path) -> None:
    """No volume a default Knative install refuses: the warm-up list is fetched from the
    object storage into an emptyDir cache, like every other pod's models."""
    args = ["--tenant", "rare", "--from-flags", "--autoscaler", "knative", "--warmup", "swapper"]
    _overlay(k8s_copy, *args)
    (service,) = [d for d in kustomize(k8s_copy / "tenants" / "rare") if d["kind"] == "Service"]
    spec = service["spec"]["template"]["spec"]
    assert {"name": "models", "emptyDir": {"sizeLimit": "20Gi"}} in spec["volumes"]
    assert not any("persistentVolumeClaim" in volume for volume in spec["volumes"])
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert (env["FACEGATE_WARMUP_MODELS"], env["FACEGATE_MODELS_IN_STORAGE"]) == ("swapper", "true")
    assert env["FACEGATE_MODELS_DIR"] == "/models"


def test_inputs_stored_by_an_earlier_release_still_load(k8s_copy: Path) -> None:
    """overlay-inputs.yaml written with the retired models-volume inputs regenerates (they
    are dropped), while a real typo is still refused."""
    _overlay(k8s_copy, "--tenant", "old", "--from-flags")
    inputs = k8s_copy / "tenants" / "old" / "generated" / "overlay-inputs.yaml"
    stored = inputs.read_text()
    inputs.write_text(stored + "models_bytes: 21474836480\nknative_models_pvc: false\n")
    _overlay(k8s_copy, "--tenant", "old", "--from-flags")
    assert inputs.read_text() == stored
    inputs.write_text(stored + "worker_cpus: 3\n")
    refused = CliRunner().invoke(
        main, ["deploy", "overlay", "--k8s-root", str(k8s_copy), "--tenant", "old", "--from-flags"]
    )
    assert refused.exit_code != 0
    assert "worker_cpus" in refused.output

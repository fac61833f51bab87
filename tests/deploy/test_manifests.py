"""Every overlay renders, validates against the Kubernetes schemas, passes checkov, and keeps
the pod hardening the specification asks for."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_tools import (
    K8S,
    K8S_VERSION,
    ROOT,
    as_pod,
    kustomize,
    overlays,
    pod_specs,
    require,
    with_turn,
)

OVERLAYS = overlays()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    found = {path.name: kustomize(path) for path in OVERLAYS}
    found["logical-turn"] = kustomize(with_turn(tmp_path_factory.mktemp("turn")))
    return found


def test_the_repository_has_logical_and_each_tenant_variant() -> None:
    names = {path.name for path in OVERLAYS}
    assert "logical" in names
    tenant_files = {p.name for path in OVERLAYS for p in path.glob("generated/*.yaml")}
    assert {"hpa.yaml", "keda.yaml", "knative.yaml"} <= tenant_files


def test_every_object_validates_against_the_kubernetes_schemas(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    checked = 0
    for overlay, documents in rendered.items():
        for doc in documents:
            try:
                kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
            except kubernetes_validate.SchemaNotFoundError:
                # Custom resources (KEDA, Knative): no published core schema; their pod
                # templates are checked as Pods and their fields by the tests below.
                assert doc["apiVersion"].split("/")[0] in {"keda.sh", "serving.knative.dev"}, doc
                if pod_specs(doc):
                    kubernetes_validate.validate(as_pod(doc), K8S_VERSION, strict=True)
            except kubernetes_validate.ValidationError as error:
                pytest.fail(f"{overlay}: {doc['kind']}/{doc['metadata']['name']}: {error}")
            checked += 1
    assert checked > 40


def test_schema_validation_catches_a_broken_object() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    broken = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "2"}, "hardd": {}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_every_pod_is_hardened_and_bounded(rendered: dict[str, list[dict[str, Any]]]) -> None:
    pods = 0
    for documents in rendered.values():
        for doc in documents:
            for spec in pod_specs(doc):
                pods += 1
                where = f"{doc['kind']}/{doc['metadata']['name']}"
                assert spec["automountServiceAccountToken"] is False, where
                if doc["kind"] == "Service":
                    # A default Knative install refuses a pod-level securityContext
                    # (kubernetes.podspec-securitycontext); the container carries it all.
                    assert "securityContext" not in spec, where
                else:
                    assert spec["securityContext"]["runAsNonRoot"] is True, where
                    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
                for container in spec["containers"] + spec.get("initContainers", []):
                    context = container["securityContext"]
                    assert context["runAsNonRoot"] is True, where
                    assert context["readOnlyRootFilesystem"] is True, where
                    assert context["allowPrivilegeEscalation"] is False, where
                    assert context["capabilities"]["drop"] == ["ALL"], where
                    assert "add" not in context["capabilities"], where
                    assert context["seccompProfile"]["type"] == "RuntimeDefault", where
                    resources = container["resources"]
                    assert {"cpu", "memory"} <= set(resources["requests"]), where
                    assert {"cpu", "memory"} <= set(resources["limits"]), where
                    mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
                    assert "/tmp" in mounts, where  # the only scratch space on a read-only root
    assert pods >= 6


def test_serving_pods_probe_healthz_and_readyz(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for documents in rendered.values():
        for doc in documents:
            if doc["metadata"]["name"] == "facegate-tenant-sync":
                continue  # no HTTP server (justified checkov skip in the manifest)
            if doc["metadata"]["name"] == "facegate-turn" and doc["kind"] == "Deployment":
                (container,) = doc["spec"]["template"]["spec"]["containers"]
                for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                    assert container[probe]["tcpSocket"]["port"] == "turn-tcp"  # no HTTP
                continue
            for spec in pod_specs(doc):
                container = spec["containers"][0]
                assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
                assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_logical_overlay_carries_tenants_yaml_and_secret_references(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    documents = rendered["logical"]
    (config,) = [d for d in documents if d["kind"] == "ConfigMap"]
    assert config["metadata"]["name"] == "facegate-tenants"  # fixed name: updates in place
    tenants = yaml.safe_load(config["data"]["tenants.yaml"])["tenants"]
    assert {t["id"] for t in tenants} >= {"demo"}
    assert not [d for d in documents if d["kind"] == "Secret"]  # referenced, never shipped
    (account,) = [d for d in documents if d["kind"] == "ServiceAccount"]
    assert account["automountServiceAccountToken"] is False
    kinds = {d["kind"] for d in documents}
    assert {"PodDisruptionBudget", "HorizontalPodAutoscaler", "Ingress", "Service"} <= kinds
    assert {d["metadata"].get("namespace") for d in documents if d["kind"] != "Namespace"} == {
        "facegate"
    }


def _checkov(directory: Path) -> dict[str, Any]:
    checkov = require("checkov")
    result = subprocess.run(
        [checkov, "-d", str(directory), "--framework", "kubernetes", "--output", "json",
         "--skip-download", "--compact"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    report = json.loads(result.stdout)
    return report[0] if isinstance(report, list) else report


def test_checkov_passes_with_only_justified_skips(
    rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    require("checkov")
    for overlay, documents in rendered.items():
        extra = [
            as_pod(d)
            for d in documents
            if d["apiVersion"].startswith("serving.knative") and pod_specs(d)
        ]
        text = yaml.safe_dump_all(documents + extra, sort_keys=False)
        (tmp_path / f"{overlay}.yaml").write_text(text)
    report = _checkov(tmp_path)
    failed = [f"{c['check_id']} {c['resource']}" for c in report["results"]["failed_checks"]]
    assert failed == []
    assert report["summary"]["passed"] > 100
    for check in report["results"]["skipped_checks"]:
        # every skip carries its reason (checkov.io/skipN: ID=reason, with a comment beside)
        assert check["check_id"] in {
            *("CKV_K8S_43", "CKV_K8S_35", "CKV_K8S_8", "CKV_K8S_9"),
            "CKV_K8S_29",  # Knative only: see facegate.deploy.knative
        }
        assert len(check["check_result"]["suppress_comment"]) > 20, check


def test_checkov_catches_a_root_pod(tmp_path: Path) -> None:
    require("checkov")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bad", "namespace": "x"},
        "spec": {
            "containers": [{"name": "c", "image": "x:1", "securityContext": {"privileged": True}}]
        },
    }
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(pod))
    failed = {c["check_id"] for c in _checkov(tmp_path)["results"]["failed_checks"]}
    assert "CKV_K8S_16" in failed  # privileged container


def test_dockerfile_passes_hadolint() -> None:
    hadolint = require("hadolint")
    dockerfile = ROOT / "deploy" / "docker" / "Dockerfile"
    result = subprocess.run(
        [hadolint, str(dockerfile)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = dockerfile.read_text()
    assert "USER 10001:10001" in text
    assert "HEALTHCHECK" in text
    assert "/healthz" in text
    assert "--no-deps -r requirements/lock.txt" in text
    assert "ARG VARIANT=cpu" in text
    assert "requirements/cuda.txt" in text  # the cuda variant's onnxruntime-gpu
    turn = ROOT / "deploy" / "docker" / "turn.Dockerfile"
    result = subprocess.run([hadolint, str(turn)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "USER 10002:10002" in turn.read_text()  # the manifest's runAsUser
    assert "FROM scratch AS runtime" in turn.read_text()


def test_monitoring_component_adds_scrapes_alerts_dashboard_and_log_pipeline(
    tmp_path: Path,
) -> None:
    root = tmp_path / "k8s"
    shutil.copytree(K8S, root)
    # As docs/deploy.md says: the component added to the logical overlay.
    overlay = root / "logical"
    with (overlay / "kustomization.yaml").open("a") as kustomization:
        kustomization.write("components:\n  - ../components/monitoring\n")
    documents = kustomize(overlay)
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    monitor = by_kind[("PodMonitor", "facegate")]
    assert monitor["metadata"]["namespace"] == "facegate"
    assert monitor["spec"]["podMetricsEndpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "30s"}
    ]
    api = by_kind[("Deployment", "facegate-api")]["spec"]["template"]
    (container,) = api["spec"]["containers"]
    assert {"name": "http", "containerPort": 8000, "protocol": "TCP"} in container["ports"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= api["metadata"]["labels"].items()
    rules = by_kind[("PrometheusRule", "facegate")]["spec"]["groups"][0]["rules"]
    assert len(rules) >= 5
    dashboard = by_kind[("ConfigMap", "facegate-grafana-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["facegate.json"])["panels"]
    alloy = by_kind[("ConfigMap", "facegate-alloy")]["data"]["facegate.alloy"]
    assert 'loki.source.kubernetes "facegate"' in alloy
    assert "values = { tenant" in alloy


def test_public_ingress_routes_no_metrics_or_probes(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    (ingress,) = [d for d in rendered["logical"] if d["kind"] == "Ingress"]
    paths = {(p["path"], p["pathType"]) for r in ingress["spec"]["rules"]
             for p in r["http"]["paths"]}  # fmt: skip
    assert ("/v1/", "Prefix") in paths
    assert ("/", "Prefix") not in paths  # "/" is Exact: the console page only
    for path, kind in paths:
        for private in ("/metrics", "/readyz", "/healthz"):
            assert not (private.startswith(path) if kind == "Prefix" else private == path)
    (api,) = [d for d in rendered["logical"] if d["metadata"]["name"] == "facegate-api"
              and d["kind"] == "Deployment"]  # fmt: skip
    env = {
        e["name"]: e.get("value") for e in api["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert json.loads(env["FACEGATE_TRUSTED_PROXIES"])  # the ingress's X-Forwarded-For believed
    assert env["FACEGATE_SCHEMA_ON_START"] == "check"
    (init,) = api["spec"]["template"]["spec"]["initContainers"]
    assert init["args"] == ["db", "upgrade"]


def _by(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def test_api_pods_reach_each_other_to_place_streams_and_nothing_more(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    documents = rendered["logical"]
    api = _by(documents, "Deployment", "facegate-api")["spec"]["template"]
    env = {e["name"]: e for e in api["spec"]["containers"][0]["env"]}
    names = list(env)
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # defined after POD_IP, so the kubelet expands it
    assert names.index("POD_IP") < names.index("FACEGATE_STREAM_PEER_URL")
    assert env["FACEGATE_STREAM_PEER_URL"]["value"] == "http://$(POD_IP):8000"
    ports = api["spec"]["containers"][0]["ports"]
    assert {"name": "http", "containerPort": 8000, "protocol": "TCP"} in ports
    # the handed request's X-Forwarded-For is believed: the pod network is trusted
    assert "10.0.0.0/8" in json.loads(env["FACEGATE_TRUSTED_PROXIES"]["value"])
    policy = _by(documents, "NetworkPolicy", "allow-api-peers")["spec"]
    api_pods = {"app.kubernetes.io/name": "facegate", "app.kubernetes.io/component": "api"}
    assert api_pods.items() <= api["metadata"]["labels"].items()
    assert policy["podSelector"]["matchLabels"] == api_pods
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = policy["ingress"]
    (egress,) = policy["egress"]
    for rule, side in ((ingress, "from"), (egress, "to")):
        assert rule[side] == [{"podSelector": {"matchLabels": api_pods}}]
        assert rule["ports"] == [{"protocol": "TCP", "port": 8000}]


def test_the_turn_component_relays_only_what_it_must(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    documents = rendered["logical-turn"]
    assert not [d for d in rendered["logical"] if "turn" in d["metadata"]["name"]]  # optional
    deployment = _by(documents, "Deployment", "facegate-turn")
    assert deployment["metadata"]["namespace"] == "facegate"
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    spec = deployment["spec"]["template"]["spec"]
    assert "hostNetwork" not in spec
    (container,) = spec["containers"]
    assert container["image"].startswith("ghcr.io/facegate/facegate-turn:")
    assert spec["securityContext"]["runAsUser"] == 10002  # not the api's user
    assert all("hostPort" not in port for port in container["ports"])
    args = container["args"]
    flags = dict(arg.split("=", 1) for arg in args if "=" in arg)
    low, high = int(flags["--min-port"]), int(flags["--max-port"])
    assert {"--use-auth-secret", "--no-tcp-relay", "--no-multicast-peers", "--no-cli"} <= set(args)
    assert flags["--static-auth-secret"] == "$(TURN_SECRET)"  # from the Secret, never a value
    assert "--allow-loopback-peers" not in args
    denied = [arg for arg in args if arg.startswith("--denied-peer-ip=")]
    assert "--denied-peer-ip=169.254.0.0-169.254.255.255" in denied  # the metadata address
    env = {e["name"]: e for e in container["env"]}
    assert env["TURN_SECRET"]["valueFrom"]["secretKeyRef"] == {
        "name": "facegate-turn",
        "key": "static-auth-secret",
    }
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"

    # The Service: every relay port coturn may hand out, TURN on UDP and TCP, the client's
    # own address kept; the namespace's quota lets exactly this one load balancer in.
    service = _by(documents, "Service", "facegate-turn")
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["externalTrafficPolicy"] == "Local"
    assert (
        service["spec"]["selector"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    ports = {(p["port"], p["protocol"]) for p in service["spec"]["ports"]}
    assert ports == {(3478, "UDP"), (3478, "TCP")} | {(p, "UDP") for p in range(low, high + 1)}
    assert all(p["port"] == p["targetPort"] for p in service["spec"]["ports"])
    assert len(ports) <= 50  # a common cloud limit of listeners per load balancer
    quota = _by(documents, "ResourceQuota", "facegate-quota")["spec"]["hard"]
    assert quota["services.loadbalancers"] == "1"
    assert (
        _by(rendered["logical"], "ResourceQuota", "facegate-quota")["spec"]["hard"][
            "services.loadbalancers"
        ]
        == "0"
    )

    # Its network policy: in, TURN and the relay range; out, UDP to the api pods and to
    # public addresses only. And the data services' policy leaves it out.
    policy = _by(documents, "NetworkPolicy", "allow-turn")["spec"]
    assert policy["podSelector"]["matchLabels"] == {"app.kubernetes.io/component": "turn"}
    (ingress,) = policy["ingress"]
    assert {"protocol": "UDP", "port": low, "endPort": high} in ingress["ports"]
    api_peer, public = policy["egress"]
    assert api_peer["to"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/component": "api"}}}
    ]
    (block,) = public["to"]
    assert block["ipBlock"]["cidr"] == "0.0.0.0/0"
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} <= set(
        block["ipBlock"]["except"]
    )
    for rule in policy["egress"]:
        assert {port["protocol"] for port in rule["ports"]} == {"UDP"}
    data = _by(documents, "NetworkPolicy", "allow-egress-data")["spec"]["podSelector"]
    assert data["matchExpressions"] == [
        {"key": "app.kubernetes.io/component", "operator": "NotIn", "values": ["turn"]}
    ]
    api_turn = _by(documents, "NetworkPolicy", "allow-api-turn")["spec"]
    assert {"protocol": "UDP", "port": 3478} in api_turn["egress"][0]["ports"]

    # The api pods: the clients' URLs and the secret from the Secret, the server's side
    # through the Service's in-cluster name, relay candidates only.
    api = _by(documents, "Deployment", "facegate-api")["spec"]["template"]["spec"]
    api_env = {e["name"]: e for e in api["containers"][0]["env"]}
    assert api_env["FACEGATE_STREAM_TURN_SECRET"]["valueFrom"]["secretKeyRef"] == {
        "name": "facegate-turn",
        "key": "static-auth-secret",
    }
    assert api_env["FACEGATE_STREAM_ICE_URLS"]["valueFrom"]["secretKeyRef"]["key"] == "ice-urls"
    server_urls = json.loads(api_env["FACEGATE_STREAM_SERVER_ICE_URLS"]["value"])
    assert server_urls == [f"turn:{service['metadata']['name']}:3478?transport=udp"]
    assert api_env["FACEGATE_STREAM_ICE_RELAY_ONLY"]["value"] == "true"
    assert "FACEGATE_DATABASE_URL" in api_env  # the patch added to the env, kept the rest

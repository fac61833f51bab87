"""Run a rendered Kubernetes workload as a docker container with its pod's contract.

What a kubelet would do with the container of a rendered Deployment (or Knative Service),
done with ``docker run``: the image's entrypoint with the container's ``args``, its ``env``
(``secretKeyRef`` resolved from a dict of Secret values, an optional key may be missing),
``--read-only`` when ``readOnlyRootFilesystem``, ``--user runAsUser:runAsGroup``,
``--cap-drop`` of the dropped capabilities, ``no-new-privileges`` when privilege escalation is
off, the runtime's default seccomp filter for ``RuntimeDefault``, and only its declared volumes
writable: an ``emptyDir`` becomes a tmpfs of its ``sizeLimit`` owned by the pod's ``fsGroup``,
a ``configMap`` a read-only folder of its data, a ``persistentVolumeClaim`` a host folder.
Then its startup, readiness and liveness probes are polled the way the kubelet would (period
x failure threshold).

Two deviations, both forced by the machine and not by the manifests: containers share the
host network (this dockerd runs with ``--bridge=none``), so each gets its own port through
the variable its listening port comes from (``FACEGATE_PORT``; coturn's ``TURN_PORT``) and
its pod address (``status.podIP``) is 127.0.0.1; and the test gives each run its own Redis
key prefix. ``$(VAR)`` in ``command`` and ``args`` is expanded from the container's
environment, as the kubelet does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from deploy_tools import ROOT

INSTALL_HINT = (
    "the container tests need a docker daemon: install docker.io and debootstrap with "
    "`sudo scripts/system-packages`, then run them as root with CI=true (scripts/image starts "
    "dockerd --iptables=false --bridge=none) or set FACEGATE_TEST_DOCKER=1 with a running daemon"
)

# How long a build may take: a cold one makes the Debian base (debootstrap, about 4 min) and
# installs the lock (several minutes); a warm one reuses every layer (seconds).
BUILD_TIMEOUT = 1800


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    result = subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=120)
    return result.returncode == 0


def require_docker() -> None:
    """Skip unless the container tests may run here (see INSTALL_HINT)."""
    wanted = os.environ.get("CI") == "true" or os.environ.get("FACEGATE_TEST_DOCKER") == "1"
    if not wanted:
        pytest.skip(INSTALL_HINT)
    can_start = os.geteuid() == 0 and shutil.which("dockerd") is not None
    if not docker_available() and not can_start:
        pytest.skip(INSTALL_HINT)


def build_image(variant: str = "cpu") -> str:
    """``scripts/image`` (what ``make image`` runs); returns the tag, one per checkout (so
    the tests of two checkouts on one daemon never run each other's image)."""
    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]
    result = subprocess.run(
        [str(ROOT / "scripts" / "image")],
        env={**os.environ, "VARIANT": variant, "TAG": f"facegate-test:{checkout}-{variant}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip().splitlines()[-1]


def build_turn_image() -> str:
    """``scripts/image turn`` (``make image`` builds it too): the TURN server's image from
    Debian's coturn on the same base; one tag per checkout."""
    checkout = hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]
    result = subprocess.run(
        [str(ROOT / "scripts" / "image"), "turn"],
        env={**os.environ, "TURN_TAG": f"facegate-turn-test:{checkout}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip().splitlines()[-1]


def docker(*args: str, timeout: float = 120, check: bool = True) -> str:
    result = subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=False, timeout=timeout
    )
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:3])}...: {result.stderr[-2000:]}")
    return result.stdout


class ContractError(AssertionError):
    """The rendered workload cannot be run as written (a missing Secret key, a volume kind
    this harness does not know)."""


@dataclass
class Pod:
    """One rendered workload: its pod spec and the container of it to run."""

    name: str
    spec: dict[str, Any]
    container: dict[str, Any]

    @classmethod
    def of(cls, document: dict[str, Any], container: str | None = None, init: bool = False) -> Pod:
        spec = document["spec"]["template"]["spec"]
        containers = spec["initContainers"] if init else spec["containers"]
        chosen = (
            containers[0]
            if container is None
            else next(c for c in containers if c["name"] == container)
        )
        return cls(f"{document['metadata']['name']}-{chosen['name']}", spec, chosen)

    @property
    def security(self) -> dict[str, Any]:
        """The container's effective security context (pod level, then container level)."""
        return {**self.spec.get("securityContext", {}), **self.container.get("securityContext", {})}


@dataclass
class Cluster:
    """What the pods of one test run share: Secret values, ConfigMap data, host folders for
    claims, and the containers started (removed by :meth:`close`)."""

    image: str
    workdir: Path
    secrets: dict[str, dict[str, str]]
    config_maps: dict[str, dict[str, str]] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)

    def env(
        self, pod: Pod, port: int | None, port_variable: str = "FACEGATE_PORT"
    ) -> dict[str, str]:
        env: dict[str, str] = {}
        for entry in pod.container.get("env", []):
            if "value" in entry:  # $(VAR) of a variable defined above, as the kubelet does
                env[entry["name"]] = expand(str(entry["value"]), env)
                continue
            field_ref = entry["valueFrom"].get("fieldRef")
            if field_ref is not None:
                if field_ref["fieldPath"] != "status.podIP":
                    raise ContractError(f"{pod.name}: fieldRef {field_ref} not handled")
                env[entry["name"]] = "127.0.0.1"  # the host network (module docstring)
                continue
            reference = entry["valueFrom"]["secretKeyRef"]
            value = self.secrets.get(reference["name"], {}).get(reference["key"])
            if value is None:
                if reference.get("optional"):
                    continue
                raise ContractError(
                    f"{pod.name}: Secret {reference['name']} has no key {reference['key']}"
                )
            env[entry["name"]] = value
        if port is not None:  # the host network (see the module's docstring): its own port
            env[port_variable] = str(port)
        env.update(self.extra_env)
        return env

    def _folder(self, name: str) -> Path:
        """A host folder to bind-mount (readable by the container's user: pytest's temporary
        folders are the owner's only)."""
        folder = self.workdir / name
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
        return folder

    def _secret_folder(self, pod: Pod, secret: dict[str, Any], group: int) -> Path:
        """A Secret volume as the kubelet makes it: the listed items (or every key), each of
        ``defaultMode`` (0644 by default), group-owned by the pod's fsGroup when it has one."""
        data = self.secrets.get(secret["secretName"])
        if data is None:
            raise ContractError(f"{pod.name}: Secret {secret['secretName']} does not exist")
        items = secret.get("items") or [{"key": key, "path": key} for key in data]
        folder = self._folder(f"secret-{secret['secretName']}-{uuid.uuid4().hex[:6]}")
        has_fs_group = "fsGroup" in pod.spec.get("securityContext", {})
        for item in items:
            path = folder / item["path"]
            path.write_text(data[item["key"]])
            os.chown(path, 0, group if has_fs_group else 0)
            path.chmod(item.get("mode", secret.get("defaultMode", 0o644)))
        return folder

    def _volume_args(self, pod: Pod) -> list[str]:
        volumes = {volume["name"]: volume for volume in pod.spec.get("volumes", [])}
        security = pod.security
        group = pod.spec.get("securityContext", {}).get("fsGroup", security.get("runAsGroup", 0))
        args: list[str] = []
        for mount in pod.container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            target = mount["mountPath"]
            if "emptyDir" in volume:
                size = (
                    volume["emptyDir"]
                    .get("sizeLimit", "64Mi")
                    .replace("Gi", "g")
                    .replace("Mi", "m")
                )
                args += ["--tmpfs", f"{target}:rw,size={size},uid={security.get('runAsUser', 0)},"
                         f"gid={group},mode=0770"]  # fmt: skip
            elif "configMap" in volume:
                data = self.config_maps[volume["configMap"]["name"]]
                folder = self._folder(f"cm-{volume['configMap']['name']}")
                for key, text in data.items():
                    (folder / key).write_text(text)
                args += ["-v", f"{folder}:{target}:ro"]
            elif "secret" in volume:
                args += ["-v", f"{self._secret_folder(pod, volume['secret'], group)}:{target}:ro"]
            elif "persistentVolumeClaim" in volume:
                folder = self._folder(f"pvc-{volume['persistentVolumeClaim']['claimName']}")
                read_only = mount.get("readOnly") or volume["persistentVolumeClaim"].get("readOnly")
                args += ["-v", f"{folder}:{target}:{'ro' if read_only else 'rw'}"]
            else:
                raise ContractError(f"{pod.name}: volume kind of {volume} not handled")
        return args

    def run_args(
        self, pod: Pod, port: int | None, port_variable: str = "FACEGATE_PORT"
    ) -> list[str]:
        """The ``docker run`` arguments that hold the container to its pod's contract."""
        security = pod.security
        assert security.get("runAsNonRoot"), pod.name
        assert security.get("runAsUser"), pod.name
        args = ["--network", "host", "--user", f"{security['runAsUser']}:{security['runAsGroup']}"]
        if security.get("readOnlyRootFilesystem"):
            args.append("--read-only")
        for capability in security.get("capabilities", {}).get("drop", []):
            args += ["--cap-drop", capability]
        assert not security.get("capabilities", {}).get("add"), pod.name
        if security.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        assert not security.get("privileged"), pod.name
        # RuntimeDefault is the runtime's default filter: docker applies its default seccomp
        # profile unless told otherwise (test_containers reads the mode off each process).
        profile = security.get("seccompProfile", {}).get("type")
        assert profile == "RuntimeDefault", f"{pod.name}: seccompProfile {profile}"
        args += self._volume_args(pod)
        for name, value in self.env(pod, port, port_variable).items():
            args += ["-e", f"{name}={value}"]
        limits = pod.container.get("resources", {}).get("limits", {})
        if "memory" in limits:
            args += ["--memory", limits["memory"].replace("Gi", "g").replace("Mi", "m")]
        if pod.container.get("command"):
            args += ["--entrypoint", pod.container["command"][0]]
        return args

    def start(self, pod: Pod, port: int | None, port_variable: str = "FACEGATE_PORT") -> str:
        name = f"fgtest-{uuid.uuid4().hex[:8]}-{pod.name}"[:63]
        args = ["run", "-d", "--name", name, *self.run_args(pod, port, port_variable), self.image]
        env = self.env(pod, port, port_variable)
        words = [*pod.container.get("command", [])[1:], *pod.container.get("args", [])]
        args += [expand(word, env) for word in words]
        docker(*args)
        self.started.append(name)
        return name

    def run_to_completion(self, pod: Pod, timeout: float = 300) -> tuple[int, str]:
        """An init container or a one-off command: run it, wait for its exit, return (code,
        logs)."""
        name = self.start(pod, None)
        code = int(docker("wait", name, timeout=timeout).strip())
        return code, self.logs(name)

    def logs(self, name: str) -> str:
        result = subprocess.run(
            ["docker", "logs", name], capture_output=True, text=True, check=False, timeout=60
        )
        return result.stdout + result.stderr

    def running(self, name: str) -> bool:
        state = json.loads(docker("inspect", "--format", "{{json .State}}", name))
        return bool(state["Running"])

    def close(self) -> None:
        for name in self.started:
            docker("rm", "-f", name, check=False)


def expand(word: str, env: dict[str, str]) -> str:
    """``$(VAR)`` replaced by the container's variable, as the kubelet does in ``command``
    and ``args`` (an unknown one is left as written; ``$$`` is a literal ``$``)."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m[0] == "$$" else env.get(m[1], m[0]),
        word,
    )


def _probe_ok(port: int, probe: dict[str, Any]) -> bool:
    if "tcpSocket" in probe:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=3):
                return True
        except OSError:
            return False
    path = probe["httpGet"]["path"]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as response:
            return 200 <= int(response.status) < 400
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def wait_for_probes(cluster: Cluster, name: str, pod: Pod, port: int) -> dict[str, float]:
    """Poll the container's probes like the kubelet: the startup probe within its budget
    (period x failureThreshold), then readiness, then liveness. Returns the seconds each
    took to pass; fails with the container's logs when one does not."""
    seconds: dict[str, float] = {}
    began = time.monotonic()
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = pod.container.get(kind)
        if probe is None:
            continue
        budget = probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)
        if kind == "startupProbe" or "startupProbe" not in pod.container:
            budget += probe.get("initialDelaySeconds", 0)
        deadline = time.monotonic() + budget
        while not _probe_ok(port, probe):
            if not cluster.running(name) or time.monotonic() > deadline:
                what = probe["httpGet"]["path"] if "httpGet" in probe else "tcpSocket"
                raise AssertionError(
                    f"{pod.name}: {kind} {what} did not pass within "
                    f"{budget}s\n{cluster.logs(name)[-4000:]}"
                )
            time.sleep(0.5)
        seconds[kind] = round(time.monotonic() - began, 1)
    return seconds

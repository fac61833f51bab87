"""The TURN server of live streams runs for real: its image is built here (``scripts/image
turn``: Debian's coturn on the same Debian base, what ``make image`` builds too) and the
rendered ``facegate-turn`` workload (the logical overlay with ``components/turn``) starts
as a container with its pod's contract (containerkit: read-only root, its user, no
capability, no privilege escalation, seccomp), passes its probes, and makes a TURN
allocation for a credential the api's own settings hand out (read from the rendered api
container's environment and the ``facegate-turn`` Secret) — and refuses an expired one, or
one moved to another tenant. Its logs never show the secret.

Needs a docker daemon (CI=true as root starts one; see containerkit.INSTALL_HINT). It does
not need the facegate image: a cold run makes the Debian base (debootstrap) and installs
coturn, a warm one reuses the layers.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from containerkit import Cluster, Pod, build_turn_image, docker, require_docker, wait_for_probes
from deploy_tools import kustomize
from test_manifests import with_turn
from tests.motokit import free_port
from tests.streams.turnkit import allocate

from facegate.settings import get_settings
from facegate.streams.ice import client_ice_servers, server_configuration

pytestmark = [pytest.mark.slow]

SECRET = "container-turn-secret-" + "y" * 16


def find(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


@pytest.fixture(scope="module")
def turn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str, Pod, int]]:
    require_docker()
    image = build_turn_image()
    documents = kustomize(with_turn(tmp_path_factory.mktemp("k8s")))
    port = free_port()
    cluster = Cluster(
        image=image,
        workdir=tmp_path_factory.mktemp("pods"),
        secrets={
            "facegate-turn": {
                "static-auth-secret": SECRET,
                "public-ip": "127.0.0.1",
                "ice-urls": json.dumps([f"turn:127.0.0.1:{port}?transport=udp"]),
            },
            # What the api container's other variables need (not used here).
            "facegate-secrets": {"database-url": "sqlite://", "storage-url": "file:///tmp/s"},
        },
    )
    pod = Pod.of(find(documents, "Deployment", "facegate-turn"))
    try:
        name = cluster.start(pod, port, port_variable="TURN_PORT")
        wait_for_probes(cluster, name, pod, port)
        api = Pod.of(find(documents, "Deployment", "facegate-api"))
        yield cluster, name, api, port
    finally:
        cluster.close()


def test_the_turn_container_runs_confined_and_passes_its_probes(
    turn: tuple[Cluster, str, Pod, int],
) -> None:
    cluster, name, _, _ = turn
    assert cluster.running(name)
    pid = docker("inspect", "--format", "{{.State.Pid}}", name).strip()
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    assert status["Seccomp"].strip() == "2"
    assert status["NoNewPrivs"].strip() == "1"
    assert int(status["CapEff"], 16) == 0
    assert status["Uid"].split()[0] == "10002"
    # No shell in the image: only coturn and the libraries it loads.
    image = docker("inspect", "--format", "{{.Config.Image}}", name).strip()
    result = docker("run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "id", check=False)
    assert result == ""


def test_the_api_settings_credentials_allocate_on_the_turn_container(
    turn: tuple[Cluster, str, Pod, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, name, api, port = turn
    # The api container's TURN settings as rendered (component patch + Secret), read by
    # facegate's own settings.
    for variable, value in cluster.env(api, None).items():
        if variable.startswith("FACEGATE_STREAM_"):
            monkeypatch.setenv(variable, value)
    settings = get_settings()
    assert settings.stream_ice_relay_only is True
    server = server_configuration(settings, uuid.uuid4(), 60).iceServers or []
    assert [s.urls for s in server] == [["turn:facegate-turn:3478?transport=udp"]]

    async def check() -> None:
        (given,) = client_ice_servers(settings, "tenant-a", 900).ice_servers
        assert given.urls == [f"turn:127.0.0.1:{port}?transport=udp"]
        assert given.username is not None
        assert given.credential is not None
        relayed = await allocate(port, given.username, given.credential)
        assert relayed is not None
        assert relayed[0] == "127.0.0.1"
        assert 49152 <= relayed[1] <= 49183  # the manifest's relay range (the Service's ports)
        (old,) = client_ice_servers(settings, "tenant-a", 900, now=time.time() - 1300).ice_servers
        assert old.username is not None
        assert old.credential is not None
        assert await allocate(port, old.username, old.credential) is None
        moved = given.username.replace(":tenant-a", ":tenant-b")
        assert await allocate(port, moved, given.credential) is None

    asyncio.run(check())
    logs = cluster.logs(name)
    assert "find credentials of user" in logs  # the refusals above, as coturn saw them
    assert SECRET not in logs

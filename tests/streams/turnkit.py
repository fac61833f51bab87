"""A real TURN server for a test or a benchmark: Debian's coturn (``turnserver``) started on
loopback with the TURN REST scheme the manifests use (``use-auth-secret`` with a
``static-auth-secret``), and a TURN allocation made with a credential, as a client's ICE
agent makes one (aioice's TURN client, which aiortc uses).

``scripts/setup`` installs coturn as root or with CI=true (``scripts/system-packages``);
elsewhere the tests that need it skip with that hint."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from aioice import stun, turn

INSTALL_HINT = (
    "coturn's turnserver is not installed: scripts/setup installs the Debian package coturn "
    "as root or with CI=true (sudo scripts/system-packages)"
)
REALM = "facegate"


def turnserver_path() -> str | None:
    return shutil.which("turnserver") or shutil.which("turnserver", path="/usr/bin:/usr/sbin")


def require_turnserver() -> str:
    """The turnserver binary; a skip with the install hint where it is missing (a failure
    under CI=true, where scripts/setup installs it)."""
    path = turnserver_path()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {INSTALL_HINT}")
        pytest.skip(INSTALL_HINT)
    return path


def _free_port() -> int:
    """A port free for both UDP and TCP on loopback (coturn listens on both)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = int(udp.getsockname()[1])
            with socket.socket() as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port


@dataclass
class TurnServer:
    port: int
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"turn:127.0.0.1:{self.port}?transport=udp"

    def allocations(self) -> int:
        """Allocations coturn logged as made so far (each relayed peer connection makes one)."""
        return self.log.read_text(errors="replace").count("ALLOCATE processed, success")


@contextmanager
def local_turn(secret: str, folder: Path, binary: str | None = None) -> Iterator[TurnServer]:
    """coturn on 127.0.0.1 (a free port; relay ports in a random range of 200), TURN REST
    credentials checked against ``secret``; stopped at the end."""
    binary = binary or turnserver_path()
    if binary is None:
        raise RuntimeError(INSTALL_HINT)
    port = _free_port()
    low = random.randrange(40000, 60000, 200)
    log = folder / f"turnserver-{port}.log"
    args = [
        binary,
        "-n",  # no configuration file: everything is on this line
        "--listening-ip=127.0.0.1",
        "--relay-ip=127.0.0.1",
        f"--listening-port={port}",
        f"--min-port={low}",
        f"--max-port={low + 199}",
        "--use-auth-secret",
        f"--static-auth-secret={secret}",
        f"--realm={REALM}",
        "--fingerprint",
        "--no-cli",
        "--no-tls",
        "--no-dtls",
        "--no-multicast-peers",
        "--no-software-attribute",
        # Both peers are on loopback here; the manifests keep coturn's default (refused).
        "--allow-loopback-peers",
        "--log-file=stdout",
        "--simple-log",
        f"--pidfile={folder}/turnserver-{port}.pid",
        f"--userdb={folder}/turndb-{port}",
        "--verbose",
    ]
    with log.open("wb") as output:
        process = subprocess.Popen(args, stdout=output, stderr=subprocess.STDOUT)
    server = TurnServer(port, log, process)
    try:
        deadline = time.monotonic() + 15
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"turnserver did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


async def allocate(port: int, username: str, password: str) -> tuple[str, int] | None:
    """A TURN allocation on ``127.0.0.1:port`` with these credentials: its relayed address,
    or None when the server refused them (401)."""
    try:
        transport, _protocol = await asyncio.wait_for(
            turn.create_turn_endpoint(
                asyncio.DatagramProtocol,
                server_addr=("127.0.0.1", port),
                username=username,
                password=password,
                lifetime=60,
                transport="udp",
            ),
            10,
        )
    except stun.TransactionFailed as exc:
        if exc.response.attributes.get("ERROR-CODE", (0,))[0] == 401:
            return None
        raise
    relayed: tuple[str, int] = transport.get_extra_info("sockname")
    transport.close()
    await asyncio.sleep(0.1)  # the refresh with lifetime 0 leaves
    return relayed

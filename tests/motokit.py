"""moto's S3 server on loopback (the real S3 protocol over HTTP, no AWS account): the storage
tests' store and the container tests' S3 (containers share the host network, so they reach
it at the same address)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from moto.server import ThreadedMotoServer


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def moto_server() -> Iterator[str]:
    """A running server; yields its endpoint URL."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()

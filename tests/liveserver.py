"""An app served by a real uvicorn on a free local port, in a thread: for tests that need
real sockets (slow clients, partial bodies, schemathesis over HTTP); and the port and stop
helpers of tests that run ``facegate serve`` as a subprocess."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(process: subprocess.Popen[bytes], grace: float = 20) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds: a server subprocess of a test."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def serving(app: FastAPI, port: int | None = None) -> Iterator[str]:
    """Run ``app`` (its lifespan included) until the block ends, on ``port`` (a free one if
    None); yields its base URL."""
    port = free_port() if port is None else port
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)

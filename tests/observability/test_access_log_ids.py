"""Each access-log line names its own request, also on a keep-alive connection (where the
server starts each request's task from the previous one's context)."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from tests.conftest import make_settings
from tests.liveserver import serving

from facegate.api.app import create_app
from facegate.observability.logging import set_log_output


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    set_log_output(stream)
    yield stream
    set_log_output(None)
    structlog.reset_defaults()


def test_pipelined_requests_log_their_own_ids(tmp_path: Path, log_stream: io.StringIO) -> None:
    """Requests sent back to back on one connection (HTTP/1.1 pipelining): uvicorn starts
    the next one from inside the previous one's task, context included."""
    sent = [f"request-{n:04d}-pipelined" for n in range(5)]
    with serving(create_app(make_settings(tmp_path), services=[])) as base:
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                b"".join(
                    f"GET /v1/me HTTP/1.1\r\nHost: x\r\nX-Request-ID: {rid}\r\n\r\n".encode()
                    for rid in sent
                )
            )
            received = b""
            while received.count(b"HTTP/1.1 401") < len(sent):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
    lines = [json.loads(line) for line in log_stream.getvalue().splitlines() if line[:1] == "{"]
    logged = [line["request_id"] for line in lines if line["event"] == "http.request"]
    assert logged == sent

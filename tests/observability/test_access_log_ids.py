"""Each access-log line names its own request, also on a keep-alive connection (where the
server starts each request's task from the previous one's context)."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

from tests.conftest import make_settings
from tests.liveserver import serving

from facegate.api.app import create_app


def test_pipelined_requests_log_their_own_ids(tmp_path: Path, captured_logs: io.StringIO) -> None:
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
    lines = [json.loads(line) for line in captured_logs.getvalue().splitlines() if line[:1] == "{"]
    logged = [line["request_id"] for line in lines if line["event"] == "http.request"]
    assert logged == sent

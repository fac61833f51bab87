"""The worker's own small HTTP server: ``/healthz``, ``/readyz`` and ``/metrics``.

A worker serves no API, but Kubernetes still needs to know whether it is alive (restart it
if not) and ready (counted as capacity), and Prometheus scrapes its metrics. The standard
library's threading HTTP server is enough for three GET routes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

Check = Callable[[], tuple[bool, str]]


class ProbeServer:
    """Answers ``/healthz`` from ``alive`` and ``/readyz`` from ``ready`` (each returns
    ``(ok, reason)``); 200 when ok, else 503 with the reason."""

    def __init__(self, host: str, port: int, *, alive: Check, ready: Check) -> None:
        checks = {"/healthz": alive, "/readyz": ready}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
                    return
                check = checks.get(path)
                if check is None:
                    self._send(404, b'{"status": "not found"}', "application/json")
                    return
                ok, reason = check()
                body = json.dumps({"status": "ok" if ok else "unavailable", "detail": reason})
                self._send(200 if ok else 503, body.encode(), "application/json")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # probes every few seconds would drown the worker's own log

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="probes", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

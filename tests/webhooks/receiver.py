"""A real HTTP receiver for webhook tests: a threaded server on a loopback address that
records each request (headers, body) and answers from a script of responses."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    host: str
    port: int
    received: list[Received] = field(default_factory=list)
    # Answers in order (status, extra headers); the last one repeats.
    answers: list[tuple[int, dict[str, str]]] = field(default_factory=lambda: [(200, {})])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/hooks/facegate?token=t0"

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.received)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            index = min(len(receiver.received), len(receiver.answers) - 1)
            receiver.received.append(
                Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            status, headers = receiver.answers[index]
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            payload = b"a body the sender never reads" * 100
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def receiving(host: str = "127.0.0.1", port: int = 0) -> Iterator[Receiver]:
    receiver = Receiver(host, port)
    server = ThreadingHTTPServer((host, port), _handler(receiver))
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

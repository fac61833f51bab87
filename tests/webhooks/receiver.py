"""A real HTTP receiver for webhook tests: a threaded server on a loopback address that
records each request (headers, body) and answers from a script of responses."""

from __future__ import annotations

import asyncio
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
    arrived: list[float] = field(default_factory=list)  # when each came (monotonic)
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
            receiver.arrived.append(time.monotonic())
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


@dataclass
class Trickler:
    """A receiver that accepts, reads the request's head, then answers one byte of a
    status line every ``interval`` seconds for ``for_seconds`` (a hostile receiver holding
    the sender's attempt). ``opened``: when each connection came (monotonic)."""

    host: str
    port: int
    interval: float
    for_seconds: float
    opened: list[float] = field(default_factory=list)
    closed: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/slow"


@contextmanager
def trickling(
    interval: float = 2.0, for_seconds: float = 30.0, host: str = "127.0.0.1"
) -> Iterator[Trickler]:
    """An asyncio server on its own thread; each connection trickles ``HTTP/1.1 200 OK``
    a byte at a time, then closes; the block's end stops it."""
    trickler = Trickler(host, 0, interval, for_seconds)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop: asyncio.Event | None = None

    handlers: set[asyncio.Task[Any]] = set()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        current = asyncio.current_task()
        if current is not None:
            handlers.add(current)
        trickler.opened.append(time.monotonic())
        try:
            await reader.readuntil(b"\r\n\r\n")
            ends = time.monotonic() + trickler.for_seconds
            line = b"HTTP/1.1 200 OK\r\nx-slow: " + b"a" * 10_000
            for byte in line:
                if time.monotonic() >= ends:
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(trickler.interval)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            trickler.closed.append(time.monotonic())
            writer.close()

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        server = await asyncio.start_server(answer, host, 0)
        trickler.port = server.sockets[0].getsockname()[1]
        ready.set()
        async with server:
            await stop.wait()
            for handler in handlers:
                handler.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield trickler
    finally:
        assert stop is not None
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()

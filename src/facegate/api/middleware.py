"""Request context (pure ASGI): request id, HSTS, and the last-resort 500."""

from __future__ import annotations

import json
import re
import uuid

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from facegate.api.errors import PROBLEM_CONTENT_TYPE
from facegate.api.handlers import internal_error_body

REQUEST_ID_HEADER = "X-Request-ID"
# A client's id is kept when it is short and plain (it ends up in logs and headers).
_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{8,128}$")
HSTS_VALUE = "max-age=31536000; includeSubDomains"

log = structlog.get_logger(__name__)


def choose_request_id(presented: str | None) -> str:
    if presented and _SANE_REQUEST_ID.match(presented):
        return presented
    return uuid.uuid4().hex


class RequestContextMiddleware:
    """Gives every request an id (``X-Request-ID`` in, out, and in every log line), adds
    HSTS when serving TLS, and turns an unhandled exception into a problem+json 500 that
    leaks nothing but the request id."""

    def __init__(self, app: ASGIApp, *, hsts: bool = False) -> None:
        self.app = app
        self.hsts = hsts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        presented = None
        for name, value in scope.get("headers", []):
            if name == b"x-request-id":
                presented = value.decode("latin-1")
                break
        request_id = choose_request_id(presented)
        scope.setdefault("state", {})["request_id"] = request_id
        extra_headers = [(b"x-request-id", request_id.encode())]
        if self.hsts:
            extra_headers.append((b"strict-transport-security", HSTS_VALUE.encode()))
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"
                ]
                message["headers"] = headers + extra_headers
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_headers)
            except Exception:
                log.exception("unhandled error", path=scope.get("path"))
                if started:
                    raise
                body = internal_error_body()
                body["request_id"] = request_id
                payload = json.dumps(body).encode()
                await send_with_headers(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [
                            (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                            (b"content-length", str(len(payload)).encode()),
                        ],
                    }
                )
                await send_with_headers({"type": "http.response.body", "body": payload})

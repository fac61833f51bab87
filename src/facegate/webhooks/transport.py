"""Sending one webhook: to the address that was checked, no redirects, short timeouts,
the answer's body never read (only its status line and headers)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from facegate.webhooks.addresses import Destination

USER_AGENT = "facegate-webhooks/1"


@dataclass(frozen=True)
class Attempt:
    """What one attempt got: a status code, or an error (connection, timeout...)."""

    status_code: int | None
    error: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class WebhookSender:
    """One httpx client for every delivery of a dispatcher (thread-safe)."""

    def __init__(self, timeout_seconds: float = 5.0) -> None:
        self.client = httpx.Client(
            follow_redirects=False,
            trust_env=False,  # no proxy from the environment: the address checked is called
            timeout=httpx.Timeout(timeout_seconds, connect=min(3.0, timeout_seconds)),
            headers={"user-agent": USER_AGENT},
        )

    def send(self, destination: Destination, headers: dict[str, str], body: bytes) -> Attempt:
        started = time.perf_counter()
        extensions = {"sni_hostname": destination.host} if destination.scheme == "https" else {}
        request = self.client.build_request(
            "POST",
            destination.connect_url,
            headers={**headers, "host": destination.host_header},
            content=body,
            extensions=extensions,
        )
        try:
            # Streamed and closed unread: a receiver's body (or a slow one) costs nothing.
            response = self.client.send(request, stream=True)
            response.close()
        except httpx.HTTPError as exc:
            return Attempt(None, f"{type(exc).__name__}: {exc}"[:300], _since(started))
        code = response.status_code
        error = None
        if response.is_redirect:
            error = f"redirect not followed ({code})"
        elif not 200 <= code < 300:
            error = f"answered {code}"
        return Attempt(code, error, _since(started))

    def close(self) -> None:
        self.client.close()


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 4)

"""Sending one webhook: to the address that was checked, no redirects, and one deadline for
the whole attempt, wall clock — connect, send the body, read the status line and headers.
httpx's timeouts apply to each read, so a receiver trickling a byte a second never trips
them; the attempt runs under ``asyncio.timeout`` instead. The answer's body is never read.

What an attempt records says what went wrong in a few fixed words (never the exception's
text: it can name the address connected to)."""

from __future__ import annotations

import asyncio
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


def new_client(timeout_seconds: float) -> httpx.AsyncClient:
    """The client of one dispatcher's event loop (bound to it: one per loop)."""
    return httpx.AsyncClient(
        follow_redirects=False,
        trust_env=False,  # no proxy from the environment: the address checked is called
        timeout=httpx.Timeout(timeout_seconds, connect=min(3.0, timeout_seconds)),
        headers={"user-agent": USER_AGENT},
        # Every attempt on a connection of its own: a connection kept from a receiver's
        # earlier answer is not re-checked, and the deadline covers the connect too.
        limits=httpx.Limits(max_keepalive_connections=0),
    )


async def send(
    client: httpx.AsyncClient,
    destination: Destination,
    headers: dict[str, str],
    body: bytes,
    deadline_seconds: float,
) -> Attempt:
    """POST ``body``; the attempt ends at ``deadline_seconds`` whatever the receiver does."""
    started = time.perf_counter()
    extensions = {"sni_hostname": destination.host} if destination.scheme == "https" else {}
    request = client.build_request(
        "POST",
        destination.connect_url,
        headers={**headers, "host": destination.host_header},
        content=body,
        extensions=extensions,
    )
    try:
        async with asyncio.timeout(deadline_seconds):
            # Streamed and closed unread: a receiver's body (or a slow one) costs nothing.
            response = await client.send(request, stream=True)
            await response.aclose()
    except TimeoutError:
        return Attempt(None, f"timed out ({deadline_seconds:g} s for the attempt)", _since(started))
    except httpx.TimeoutException as exc:
        return Attempt(None, f"{type(exc).__name__}: timed out", _since(started))
    except httpx.ConnectError:
        return Attempt(None, "ConnectError: could not connect", _since(started))
    except httpx.HTTPError as exc:
        return Attempt(None, f"{type(exc).__name__}: the exchange failed", _since(started))
    code = response.status_code
    error = None
    if response.is_redirect:
        error = f"redirect not followed ({code})"
    elif not 200 <= code < 300:
        error = f"answered {code}"
    return Attempt(code, error, _since(started))


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 4)

"""Attacks on the public upload routes (``POST /v1/verify``, ``POST /v1/reports``) over a
real socket (uvicorn), with the in-flight cap lowered to 32 as in the issue.

Slow anonymous bodies and bodies with made-up credentials, from many addresses
(``X-Forwarded-For`` through a trusted proxy), must cost a tenant with a valid key nothing;
a bad credential is refused from the headers and counts towards the ban; a public upload
ends at its deadline however steadily it drips; an IPv6 client is one client per /64.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.api.jobhelpers import photo
from tests.api.test_hostile_clients import create_keys, open_request, read_status
from tests.conftest import make_settings
from tests.liveserver import serving

from facegate.api.app import create_app
from facegate.api.bodyguard import BodyBudget
from facegate.provenance.keys import create_keys as create_signing_keys

pytestmark = pytest.mark.timeout(120)
BYSTANDER = "198.51.100.2"
DEADLINE = 4.0  # the public upload deadline of this server
MIN_RATE = 100  # bytes per second; the attackers send 16x faster, so a busy machine
# (a late drip) still leaves only the wall-clock deadline to end them
BAN_AFTER = 3
BOUNDARY = "x"
# The start of a well-formed form: the file part's headers; the drip is its content.
PREAMBLE = (
    f"--{BOUNDARY}\r\n"
    'Content-Disposition: form-data; name="file"; filename="clip.mp4"\r\n'
    "Content-Type: video/mp4\r\n\r\n"
).encode()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    tmp: Path = tmp_path_factory.mktemp("public")
    keys = create_keys(f"sqlite:///{tmp}/facegate.db")
    create_signing_keys(tmp / "provenance")
    settings = make_settings(
        tmp,
        rate_limit_enabled=True,
        trusted_proxies=["127.0.0.1/32"],
        body_grace_seconds=1.0,
        body_min_bytes_per_second=MIN_RATE,
        public_upload_deadline_seconds=DEADLINE,
        max_in_flight_requests=32,  # shares: 2 per client, 4 anonymous, 2 public uploads
        ban_max_failures=BAN_AFTER,
        rate_limit_ip_per_minute=10_000,
    )
    with serving(create_app(settings, services=[])) as base:
        yield base, keys


def upload_headers(address: str, length: int = 1_000_000, **extra: str) -> dict[str, str]:
    return {
        "Content-Length": str(length),
        "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
        "X-Forwarded-For": address,
        **extra,
    }


class Dripper:
    """Keeps slow bodies alive: every quarter second a few hundred bytes to each socket
    (1.6 KB/s, over the server's minimum rate), until stopped."""

    def __init__(self, sockets: list[socket.socket]) -> None:
        self.sockets = sockets
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        live = list(self.sockets)
        while live and not self.stop.wait(0.25):
            for sock in list(live):
                try:
                    sock.sendall(b"-" * 400)
                except OSError:
                    live.remove(sock)  # answered and closed by the server

    def __enter__(self) -> Dripper:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(5)


def open_upload(base: str, path: str, headers: dict[str, str]) -> socket.socket:
    return open_request(base, "POST", path, headers, PREAMBLE)


def verify_form(data: bytes) -> dict[str, tuple[str, bytes, str]]:
    return {"file": ("p.jpg", data, "image/jpeg")}


def test_slow_public_and_fake_bearer_uploads_cost_a_tenant_nothing(
    live: tuple[str, dict[str, str]],
) -> None:
    """The issue's attack on both public routes: 8 slow anonymous uploads and 32 with a
    made-up bearer token from 16 addresses, all dripping over the minimum rate. A tenant
    with a valid key (reading, verifying) and an anonymous reader are served throughout;
    every attacking socket ends refused."""
    base, keys = live
    sockets = []
    for number in range(8):
        path = "/v1/verify" if number % 2 else "/v1/reports"
        sockets.append(open_upload(base, path, upload_headers(f"192.0.2.{number + 1}")))
    for number in range(32):
        headers = upload_headers(
            f"203.0.113.{number % 16 + 1}", Authorization=f"Bearer fg_made_up_{number}"
        )
        sockets.append(open_upload(base, "/v1/verify", headers))
    tenant = {"Authorization": f"Bearer {keys['globex']}", "X-Forwarded-For": BYSTANDER}
    statuses: list[int] = []
    image = photo(width=96)
    with Dripper(sockets), httpx.Client(base_url=base, timeout=20) as client:
        time.sleep(0.5)  # every attacker is in
        started = time.monotonic()
        while time.monotonic() - started < DEADLINE - 1:
            statuses.append(client.get("/v1/me", headers=tenant).status_code)
            answer = client.post("/v1/verify", headers=tenant, files=verify_form(image))
            statuses.append(answer.status_code)
            reader = {"X-Forwarded-For": "198.51.100.77"}
            statuses.append(client.get("/openapi.json", headers=reader).status_code)
            # Paced as a user's client is: on a quiet machine the loop ran ~12 rounds a
            # second and spent globex's own 120 requests a minute (429, its rate limit).
            time.sleep(0.1)
        assert statuses
        assert set(statuses) == {200}, statuses
        answers = [read_status(sock) for sock in sockets]
    anonymous = [status for status, _ in answers[:8]]
    faked = [status for status, _ in answers[8:]]
    # Two anonymous uploads held to their deadline (the public share), the rest refused.
    assert sorted(anonymous) == [408, 408] + [429] * 6, anonymous
    limits = {str(problem.get("limit")) for _, problem in answers[:8]}
    assert limits == {"public_upload_deadline_seconds", "max_in_flight_public_uploads"}
    # Made-up tokens: 401 from the headers, then banned (403) once an address has failed
    # BAN_AFTER times; none held a slot.
    assert set(faked) <= {401, 403}, faked


def test_a_slow_public_upload_ends_at_its_deadline(live: tuple[str, dict[str, str]]) -> None:
    base, _ = live
    sock = open_upload(base, "/v1/verify", upload_headers("192.0.2.100"))
    started = time.monotonic()
    with Dripper([sock]):
        status, problem = read_status(sock)
    took = time.monotonic() - started
    assert status == 408, problem
    assert problem["limit"] == "public_upload_deadline_seconds"
    assert problem["limit_value"] == DEADLINE
    assert DEADLINE - 0.5 < took < DEADLINE + 3


@pytest.mark.parametrize("path", ["/v1/verify", "/v1/reports"])
def test_a_bad_credential_is_refused_before_the_body_and_counts_towards_the_ban(
    live: tuple[str, dict[str, str]], path: str
) -> None:
    """Only the headers are sent: a server that read the body first would never answer
    (the client would time out)."""
    base, _ = live
    address = "203.0.113.200" if path == "/v1/verify" else "203.0.113.201"
    headers = upload_headers(address, 200 * 1024 * 1024, Authorization="Bearer fg_made_up")
    seen = []
    for _ in range(BAN_AFTER + 1):
        sock = open_request(base, "POST", path, headers)
        sock.settimeout(5)
        seen.append(read_status(sock))
    assert [status for status, _ in seen] == [401] * BAN_AFTER + [403], seen
    assert str(seen[-1][1]["type"]).endswith("/banned")


def test_an_ipv6_client_is_one_client_per_64(live: tuple[str, dict[str, str]]) -> None:
    """Bans and in-flight shares key an IPv6 client by its /64: its other addresses are
    banned with it and share its slots; the next /64 is someone else."""
    base, _ = live
    for number in range(BAN_AFTER):
        headers = upload_headers(f"2001:db8:1:2::{number + 1:x}", Authorization="Bearer bad")
        assert read_status(open_request(base, "POST", "/v1/verify", headers))[0] == 401
    reader = "/openapi.json"
    with httpx.Client(base_url=base, timeout=10) as client:
        banned = client.get(reader, headers={"X-Forwarded-For": "2001:db8:1:2:ffff::9"})
        other = client.get(reader, headers={"X-Forwarded-For": "2001:db8:1:3::1"})
    assert banned.status_code == 403, banned.text
    assert other.status_code == 200, other.text

    # The per-client share (2 of 32) holds for the whole /64.
    held = [open_upload(base, "/v1/verify", upload_headers(f"2001:db8:5:6::{n}")) for n in (1, 2)]
    with Dripper(held):
        time.sleep(0.3)
        third = open_upload(base, "/v1/verify", upload_headers("2001:db8:5:6:7::3"))
        status, problem = read_status(third)
        for sock in held:
            sock.close()
    assert status == 429, problem
    assert problem["limit"] == "max_in_flight_per_client"


@pytest.mark.parametrize("early", [0.0, 0.002])
def test_a_timer_that_fires_a_hair_early_still_names_the_deadline(early: float) -> None:
    """asyncio may wake a timeout a little before its time: the refusal names the deadline
    that was the nearer one, not whichever the clock happens to show passed."""
    now = [100.0]
    budget = BodyBudget(10**6, min_rate=100, grace=1.0, clock=lambda: now[0], wall=DEADLINE)
    budget.count(2_000)  # earned 20 s at the minimum rate: the wall is nearer
    now[0] = budget.deadline() - early
    assert budget.timeout().extra["limit"] == "public_upload_deadline_seconds"
    slow = BodyBudget(10**6, min_rate=100, grace=1.0, clock=lambda: now[0], wall=DEADLINE)
    now[0] = slow.deadline() - early  # nothing arrived: the grace ends first
    assert slow.timeout().extra["limit"] == "body_min_bytes_per_second"

"""SSRF: a webhook is never sent to a loopback, private, link-local (metadata), multicast
or reserved address, IPv4 or IPv6, nor to a name resolving to one, nor through a redirect;
the refusal is logged (JSON, with the tenant) and is in the tenant's delivery log. An
address the operator allow-lists is called, at the address that was checked."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, submit
from tests.webhooks.receiver import receiving

from facegate.webhooks import addresses
from facegate.webhooks.addresses import AddressRefused, destination, parse_networks, refusal
from facegate.webhooks.dispatcher import DeliveryConfig, WebhookDispatcher

pytestmark = pytest.mark.timeout(120)
ADMIN = ("jobs:write", "jobs:read", "tenant:admin")


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("10.0.0.5", "private"),
        ("172.16.3.4", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("100.64.0.1", "not a public"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ],
)
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    why = refusal(ipaddress.ip_address(address))
    assert why is not None
    assert kind in why


def test_public_and_allow_listed_addresses_pass() -> None:
    for public in ("93.184.215.14", "2606:4700:4700::1111", "::ffff:93.184.215.14"):
        assert refusal(ipaddress.ip_address(public)) is None
    allowed = parse_networks(["127.0.0.1/32", "10.20.0.0/16"])
    assert refusal(ipaddress.ip_address("127.0.0.1"), allowed) is None
    assert refusal(ipaddress.ip_address("::ffff:127.0.0.1"), allowed) is None
    assert refusal(ipaddress.ip_address("10.20.3.4"), allowed) is None
    assert refusal(ipaddress.ip_address("127.0.0.2"), allowed) is not None
    assert refusal(ipaddress.ip_address("10.21.0.1"), allowed) is not None


def test_a_name_is_refused_when_any_of_its_addresses_is() -> None:
    def resolver(host: str, port: int) -> list[Any]:
        return [ipaddress.ip_address("93.184.215.14"), ipaddress.ip_address("10.0.0.9")]

    with pytest.raises(AddressRefused, match=r"10\.0\.0\.9 is a private address"):
        destination("https://mixed.example.com/hook", resolver=resolver)
    with pytest.raises(AddressRefused, match="loopback"):
        destination("http://localhost:9/hook")  # the system resolver, for real
    for url in ("ftp://example.com/", "http://user:pw@example.com/", "http:///nohost"):
        with pytest.raises(AddressRefused):
            destination(url)


async def test_literal_addresses_are_refused_at_registration(
    make_client: Any, captured_logs: Any
) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        admin = h.headers("studio", ADMIN)
        for url in (
            "http://127.0.0.1:8080/hook",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]:8080/hook",
            "http://[::ffff:127.0.0.1]/hook",
            "https://10.1.2.3/hook",
            "gopher://example.com/",
        ):
            refused = await h.client.post("/v1/webhooks", headers=admin, json={"url": url})
            assert refused.status_code == 422, url
            assert refused.json()["type"].endswith("webhook-url-refused")
        assert (await h.client.get("/v1/webhooks", headers=admin)).json() == []
    lines = [json.loads(line) for line in captured_logs.getvalue().splitlines() if line]
    refusals = [line for line in lines if line.get("event") == "webhook.refused"]
    assert len(refusals) == 6
    assert {line["tenant_id"] for line in refusals} == {"studio"}


async def test_names_resolving_inward_and_redirects_are_refused_at_delivery(
    make_client: Any, captured_logs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = addresses.resolve_host

    def resolver(host: str, port: int) -> list[Any]:
        inward = {  # DNS names an attacker points inwards
            "hooks.internal.test": "10.0.0.7",
            "metadata.attacker.test": "169.254.169.254",
            "six.attacker.test": "::1",
        }
        if host in inward:
            return [ipaddress.ip_address(inward[host])]
        if host == "receiver.facegate.test":  # exists only here: proves a single lookup
            return [ipaddress.ip_address("127.0.0.1")]
        return real(host, port)

    monkeypatch.setattr(addresses, "resolve_host", resolver)
    with receiving() as allowed, receiving(host="127.0.0.2") as forbidden:
        # The allow-listed receiver redirects to one that is not allow-listed.
        allowed.answers = [(302, {"location": forbidden.url}), (200, {})]
        async with make_client(webhook_allowed_networks=["127.0.0.1/32"]) as h:
            h.create_tenant("studio", **DEBUG_TENANT_POLICY)
            admin = h.headers("studio", ADMIN)
            urls = [
                "http://hooks.internal.test/hook",
                "http://metadata.attacker.test/latest/meta-data/",
                f"http://six.attacker.test:{allowed.port}/hook",
                forbidden.url.replace("127.0.0.2", "receiver.facegate.test").replace(
                    str(forbidden.port), str(allowed.port)
                ),
            ]
            for url in urls:
                created = await h.client.post("/v1/webhooks", headers=admin, json={"url": url})
                assert created.status_code == 201, created.text
            job_id = (await submit(h.client, admin)).json()["id"]
            await h.client.delete(f"/v1/jobs/{job_id}", headers=admin)
            config = DeliveryConfig(
                allowed_networks=parse_networks(["127.0.0.1/32"]), max_attempts=1
            )
            dispatcher = WebhookDispatcher(h.state.engine, config)
            dispatcher.run_once()
            dispatcher.stop()
            log = (await h.client.get("/v1/webhooks/deliveries", headers=admin)).json()

    assert len(log) == 4, log
    refused = {row["last_error"] for row in log if row["status"] == "refused"}
    assert refused == {
        "refused: hooks.internal.test: 10.0.0.7 is a private address",
        "refused: metadata.attacker.test: 169.254.169.254 is a cloud metadata address",
        "refused: six.attacker.test: ::1 is a loopback address",
    }
    redirected = next(row for row in log if row["last_status_code"] == 302)
    assert redirected["status"] == "failed"  # one attempt allowed here; never followed
    assert redirected["last_error"] == "redirect not followed (302)"
    # The redirect's target and the names pointing inwards were never called; the
    # allow-listed receiver was, by the checked address, with the name as Host.
    assert forbidden.received == []
    [call] = allowed.received
    assert call.headers["host"] == f"receiver.facegate.test:{allowed.port}"
    lines = [json.loads(line) for line in captured_logs.getvalue().splitlines() if line]
    refusals = [line for line in lines if line.get("event") == "webhook.refused"]
    assert {line["host"] for line in refusals} == {
        "hooks.internal.test",
        "metadata.attacker.test",
        "six.attacker.test",
    }
    assert {line["tenant_id"] for line in refusals} == {"studio"}
    # The redirect is logged too, with its status, the name called and the tenant.
    [redirect] = [
        line
        for line in lines
        if line.get("event") == "webhook.attempt_failed" and line.get("status_code") == 302
    ]
    assert redirect["error"] == "redirect not followed (302)"
    assert redirect["host"] == "receiver.facegate.test"
    assert redirect["tenant_id"] == "studio"

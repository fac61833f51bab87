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
        ("100.64.0.1", "shared"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        # Python 3.11 calls these global; the IANA registries do not.
        ("fec0::1", "site-local"),
        ("feff:1234::5", "site-local"),
        ("3fff::1", "documentation"),
        ("192.88.99.1", "6to4 relay"),
        ("192.0.0.8", "IETF"),
        ("::ffff:0:a00:1", "IPv4-translated"),
        ("::1.2.3.4", "IPv4-compatible"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
        ("64:ff9b:1::a00:1", "NAT64"),
        ("2001:db8::1", "documentation"),
        ("198.18.0.1", "benchmarking"),
    ],
)
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    why = refusal(ipaddress.ip_address(address))
    assert why is not None
    assert kind in why


def test_public_and_allow_listed_addresses_pass() -> None:
    for public in (
        "93.184.215.14",
        "2606:4700:4700::1111",
        "::ffff:93.184.215.14",
        "2002:5db8:d70e::1",  # 6to4 of a public address
        "2a00:1450:4001::1",
    ):
        assert refusal(ipaddress.ip_address(public)) is None, public
    allowed = parse_networks(["127.0.0.1/32", "10.20.0.0/16"])
    assert refusal(ipaddress.ip_address("127.0.0.1"), allowed, port=443) is None
    assert refusal(ipaddress.ip_address("::ffff:127.0.0.1"), allowed, port=80) is None
    assert refusal(ipaddress.ip_address("10.20.3.4"), allowed, port=443) is None
    assert refusal(ipaddress.ip_address("127.0.0.2"), allowed, port=443) is not None
    assert refusal(ipaddress.ip_address("10.21.0.1"), allowed, port=443) is not None


def test_an_allow_listed_network_opens_only_its_ports() -> None:
    """A bare entry opens 80 and 443, not the database or the admin console beside the
    receiver; an entry names other ports (a list, a range, or * for every one)."""
    ten = ipaddress.ip_address("10.20.3.4")
    bare = parse_networks(["10.20.0.0/16"])
    for port in (5432, 6379, 8080, 22):
        assert refusal(ten, bare, port=port) is not None, port
    ports = parse_networks(["10.20.0.0/16:8443,9000-9002", "[fd12::/16]:8080", "10.9.0.0/16:*"])
    assert refusal(ten, ports, port=8443) is None
    assert refusal(ten, ports, port=9001) is None
    assert refusal(ten, ports, port=443) is not None
    assert refusal(ipaddress.ip_address("fd12::5"), ports, port=8080) is None
    assert refusal(ipaddress.ip_address("fd12::5"), ports, port=8081) is not None
    assert refusal(ipaddress.ip_address("10.9.1.1"), ports, port=5432) is None
    for bad in ("10.0.0.0/8:0", "10.0.0.0/8:http", "[fd12::/16]8080", "10.0.0.0/8:9-2"):
        with pytest.raises(ValueError, match=r"10\.0\.0\.0/8|fd12"):
            parse_networks([bad])


async def test_an_allow_listed_network_refuses_a_port_not_in_its_entry(
    make_client: Any,
) -> None:
    """Through the API and the dispatcher, to a real receiver on an allow-listed address:
    refused at a port its entry does not open (at registration for a literal address, at
    delivery for a name), called once the entry names the port."""

    def resolver(host: str, port: int) -> list[Any]:
        return [ipaddress.ip_address("127.0.0.1")]

    with receiving() as receiver:
        async with make_client(webhook_allowed_networks=["127.0.0.1/32"]) as h:
            h.create_tenant("studio", **DEBUG_TENANT_POLICY)
            admin = h.headers("studio", ADMIN)
            refused = await h.client.post("/v1/webhooks", headers=admin, json={"url": receiver.url})
            assert refused.status_code == 422, refused.text
            assert f"port {receiver.port} is not open" in refused.json()["detail"]

            by_name = receiver.url.replace("127.0.0.1", "receiver.facegate.test")
            created = await h.client.post("/v1/webhooks", headers=admin, json={"url": by_name})
            assert created.status_code == 201, created.text
            for entries in (["127.0.0.1/32"], [f"127.0.0.1/32:{receiver.port}"]):
                job_id = (await submit(h.client, admin)).json()["id"]
                await h.client.delete(f"/v1/jobs/{job_id}", headers=admin)
                config = DeliveryConfig(allowed_networks=parse_networks(entries))
                WebhookDispatcher(h.state.engine, config, resolver=resolver).run_once()
            log = (await h.client.get("/v1/webhooks/deliveries", headers=admin)).json()
    assert [row["status"] for row in log] == ["succeeded", "refused"]  # newest first
    assert len(receiver.received) == 1


def test_a_name_is_refused_when_any_of_its_addresses_is() -> None:
    def resolver(host: str, port: int) -> list[Any]:
        return [ipaddress.ip_address("93.184.215.14"), ipaddress.ip_address("10.0.0.9")]

    with pytest.raises(AddressRefused, match=r"10\.0\.0\.9 is a private address") as refused:
        destination("https://mixed.example.com/hook", resolver=resolver)
    assert "10.0.0.9" not in refused.value.public  # what the tenant's delivery log says
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
        entry = [f"127.0.0.1/32:{allowed.port}"]  # the receiver's port (not 80/443)
        async with make_client(webhook_allowed_networks=entry) as h:
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
            config = DeliveryConfig(allowed_networks=parse_networks(entry), max_attempts=1)
            dispatcher = WebhookDispatcher(h.state.engine, config)
            dispatcher.run_once()
            dispatcher.stop()
            log = (await h.client.get("/v1/webhooks/deliveries", headers=admin)).json()

    assert len(log) == 4, log
    # The tenant's log says a name was refused, never what it resolved to (else it maps the
    # installation's internal DNS): one sentence for every inward name.
    refused = [row for row in log if row["status"] == "refused"]
    assert len(refused) == 3
    assert {row["last_error"] for row in refused} == {
        "refused: the host does not resolve to an allowed public address"
    }
    tenant_view = json.dumps(log)
    for inward in ("10.0.0.7", "169.254.169.254", '"::1', "private", "loopback", "metadata a"):
        assert inward not in tenant_view, inward
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
    # The operator's log line says why.
    assert {line["reason"] for line in refusals} == {
        "hooks.internal.test: 10.0.0.7 is a private address",
        "metadata.attacker.test: 169.254.169.254 is a cloud metadata address",
        "six.attacker.test: ::1 is a loopback address",
    }
    # The redirect is logged too, with its status, the name called and the tenant.
    [redirect] = [
        line
        for line in lines
        if line.get("event") == "webhook.attempt_failed" and line.get("status_code") == 302
    ]
    assert redirect["error"] == "redirect not followed (302)"
    assert redirect["host"] == "receiver.facegate.test"
    assert redirect["tenant_id"] == "studio"

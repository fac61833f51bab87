"""Every administrative CLI command leaves its audit event, with the actor ``cli:<os user>``,
the same action and target as the HTTP admin route of that action; ``facegate audit verify``
then passes over them. The command tree is classified, so a new command that is neither
walked here nor declared read-only fails the test."""

from __future__ import annotations

import getpass
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import redis
import yaml
from click.testing import CliRunner
from sqlalchemy import select
from tests.ratelimit.ratelimitfactories import require_redis, unique_prefix

from facegate.cli import COMMANDS, main
from facegate.cli.common import cli_actor
from facegate.database import create_engine_from_url, create_session_factory, session_scope
from facegate.observability.audit.tables import AuditEvent
from facegate.provenance.keys import load_keys
from facegate.ratelimit.bans import BanPolicy
from facegate.ratelimit.redisbans import RedisBanStore

# Commands that change who may do what, or what runs: each is walked below.
ADMIN_COMMANDS = {
    "tenant apply",
    "tenant suspend",
    "tenant resume",
    "key create",
    "key revoke",
    "models add",
    "bans unban",
    "provenance init",
    "provenance rotate",
    "tenant export",
    "tenant erase",
    # --apply is audited (storage.reconcile): tests/storage/test_reconcile.py
    "storage reconcile",
}
# Commands that change nothing an admin decides (reads, checks, servers, the engine alone).
OTHER_COMMANDS = {
    "api",
    "audit list",
    "audit verify",
    "bans list",
    # The schema, not a policy: upgrade brings it to the release's head (the audit table
    # itself is one of its migrations), current and check read it.
    "db check",
    "db current",
    "db upgrade",
    "deploy overlay",
    "jobs list",
    "key list",
    # Checks a signed erasure receipt against the CA and the audit chain; changes nothing.
    "receipt verify",
    "models list",
    "models verify",
    "serve",
    # A client of a running server's live streams (the server audits the stream itself).
    "stream-check",
    "swap",
    "tenant list",
    "tenant show",
    "usage export",
    "verify",
    "worker",
}


def leaf_commands() -> Iterator[str]:
    context = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from (f"{name} {sub}" for sub in command.commands)
        else:
            yield name


def test_every_command_is_classified() -> None:
    assert set(leaf_commands()) == ADMIN_COMMANDS | OTHER_COMMANDS


class Cli:
    """``facegate`` in-process on one database; records which admin commands ran."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.url = f"sqlite:///{tmp_path}/facegate.db"
        self.env = {"FACEGATE_DATABASE_URL": self.url, **env}
        self.walked: set[str] = set()

    def __call__(self, *args: str) -> str:
        result = CliRunner().invoke(main, list(args), env=self.env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        self.walked.add(" ".join(args[:2]))
        return result.output

    def events(self) -> list[AuditEvent]:
        engine = create_engine_from_url(self.url)
        try:
            with session_scope(create_session_factory(engine)) as session:
                return list(session.scalars(select(AuditEvent).order_by(AuditEvent.seq)))
        finally:
            engine.dispose()


def actions(events: list[AuditEvent]) -> list[tuple[str, str, str | None]]:
    return [(e.action, e.target, e.tenant_id) for e in events]


def test_cli_actor_is_the_os_user() -> None:
    assert cli_actor() == f"cli:{getpass.getuser()}"


def test_every_cli_admin_command_is_audited(tmp_path: Path) -> None:
    cli = Cli(
        tmp_path,
        FACEGATE_STORAGE_URL=f"file://{tmp_path}/storage",
        FACEGATE_PROVENANCE_DIR=str(tmp_path / "provenance"),
    )
    tenants = tmp_path / "tenants.yaml"
    document: dict[str, Any] = {"id": "acme", "policy": {"max_concurrent_jobs": 2}}
    tenants.write_text(yaml.safe_dump(document))
    cli("tenant", "apply", "-f", str(tenants))
    document["name"] = "Acme Studios"
    document["policy"]["moderation"] = False
    tenants.write_text(yaml.safe_dump(document))
    cli("tenant", "apply", "-f", str(tenants))
    cli("tenant", "apply", "-f", str(tenants))  # unchanged: no event
    cli("tenant", "suspend", "acme")
    cli("tenant", "resume", "acme")
    created = cli("key", "create", "acme", "--scope", "jobs:read", "--name", "ci")
    key_id = re.search(r"key/(\S+) created", created).group(1)  # type: ignore[union-attr]
    keys = cli("key", "list", "acme")
    assert key_id in keys
    cli("key", "revoke", "acme", key_id)
    weights = tmp_path / "gfpgan.onnx"
    weights.write_bytes(b"weights")
    models = str(tmp_path / "models")
    cli(
        *("models", "add", "gfpgan_1.4", str(weights), "--models-dir", models),
        *("--tag", "v1", "--kind", "face_enhancer", "--licence", "Apache-2.0"),
    )

    cli("provenance", "init", "--dir", str(tmp_path / "provenance"))
    cli("provenance", "rotate", "--dir", str(tmp_path / "provenance"))
    cli("tenant", "export", "acme", "-o", str(tmp_path / "acme.zip"))
    cli("tenant", "erase", "acme", "--yes", "-o", str(tmp_path / "receipt.json"))
    assert cli("receipt", "verify", str(tmp_path / "receipt.json")).startswith("ok:")

    events = cli.events()
    assert {e.actor for e in events} == {cli_actor()}
    assert actions(events) == [
        ("tenant.create", "tenant:acme", "acme"),
        ("tenant.update", "tenant:acme", "acme"),
        ("policy.change", "tenant:acme/policy", "acme"),
        ("tenant.suspend", "tenant:acme", "acme"),
        ("tenant.resume", "tenant:acme", "acme"),
        ("key.create", f"key:{key_id}", "acme"),
        ("key.revoke", f"key:{key_id}", "acme"),
        ("model.install", "model:gfpgan_1.4:v1", None),
        ("provenance.init", "provenance:keys", None),
        ("provenance.rotate", "provenance:keys", None),
        ("tenant.export", "tenant:acme", "acme"),
        ("tenant.erase", "tenant:acme", "acme"),
        ("erasure.receipt", "tenant:acme", "acme"),
    ]
    assert events[1].details == {"name": "Acme Studios"}
    assert events[2].details["moderation"] is False
    assert events[5].details == {"scopes": ["jobs:read"], "name": "ci"}
    assert (
        events[7].details["files"]["model"]
        == (
            json.loads(cli("models", "list", "--models-dir", models, "--json").splitlines()[-1])[
                "files"
            ][0]["sha256"]
        )
    )
    verified = cli("audit", "verify")
    assert verified.startswith(f"ok: {len(events)} events")
    assert (
        events[8].details["installation_id"]
        == f"{load_keys(tmp_path / 'provenance').installation_id:04x}"
    )
    assert cli.walked >= ADMIN_COMMANDS - {"bans unban", "storage reconcile"}


@pytest.mark.redis
def test_cli_unban_is_audited(tmp_path: Path) -> None:
    url, prefix = require_redis(), unique_prefix()
    client = redis.Redis.from_url(url)
    store = RedisBanStore(client, BanPolicy(max_failures=2), prefix)
    try:
        for _ in range(2):
            store.record_failure("203.0.113.9")
        cli = Cli(tmp_path, FACEGATE_REDIS_URL=url, FACEGATE_RATE_LIMIT_KEY_PREFIX=prefix)
        assert "203.0.113.9" in cli("bans", "list")
        cli("bans", "unban", "203.0.113.9", "--forget")
        assert store.active_ban("203.0.113.9") is None
        events = cli.events()
        assert [(e.action, e.target, e.actor, e.details) for e in events] == [
            ("ip.unban", "ip:203.0.113.9", cli_actor(), {"forget": True})
        ]
        assert cli("audit", "verify").startswith("ok: 1 events")
    finally:
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()

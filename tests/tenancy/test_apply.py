"""``facegate tenant apply`` through the CLI: the specification's document, idempotency,
``--watch`` picking up edits and ConfigMap-style symlink swaps."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from facegate.cli import main
from facegate.database import create_engine_from_url, create_session_factory, migrate
from facegate.tenancy.apply import apply_file, watch_changes
from facegate.tenancy.service import TenancyService

SPEC_DOCUMENT = {
    "tenant_id": "studio-pro-01",
    "quota": {
        "max_concurrent_jobs": 5,
        "gpu_limit": "2",
        "enable_enhance": True,
        "output_resolution": "4k",
    },
    "storage_path": "/data/tenant/studio-pro-01",
}


def run_cli(database_url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env={"FACEGATE_DATABASE_URL": database_url})
    return result.exit_code, result.output


def test_apply_accepts_specification_document_and_is_idempotent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/db.sqlite"
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(json.dumps(SPEC_DOCUMENT) + "\n---\nid: small\npolicy: {priority: 3}\n")
    first = run_cli(url, "tenant", "apply", "-f", str(tenants))
    second = run_cli(url, "tenant", "apply", "-f", str(tenants))
    tenants.write_text(
        json.dumps({**SPEC_DOCUMENT, "quota": {**SPEC_DOCUMENT["quota"], "gpu_limit": 3}})
    )
    third = run_cli(url, "tenant", "apply", "-f", str(tenants))
    shown = run_cli(url, "tenant", "show", "studio-pro-01")
    assert first == (0, "tenant/studio-pro-01 created\ntenant/small created\n")
    assert second == (0, "tenant/studio-pro-01 unchanged\ntenant/small unchanged\n")
    assert third == (0, "tenant/studio-pro-01 configured\n")
    policy = json.loads(shown[1])["policy"]
    assert policy["device_limit"] == 3
    assert policy["max_output_resolution"] == "4k"
    assert "face_enhancer" in policy["allowed_processors"]


def test_invalid_file_applies_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/db.sqlite"
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("- id: good\n- id: Bad_Id\n")
    code, output = run_cli(url, "tenant", "apply", "-f", str(tenants))
    assert code != 0
    assert "#2" in output
    assert run_cli(url, "tenant", "list") == (0, "")


def test_cli_keys_and_suspend(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/db.sqlite"
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("id: acme\n")
    assert run_cli(url, "tenant", "apply", "-f", str(tenants))[0] == 0
    code, output = run_cli(url, "key", "create", "acme", "--scope", "jobs:read")
    assert code == 0
    token = output.strip().splitlines()[-1]
    assert token.startswith("fg_")
    key_id = token.split("_")[1]
    assert key_id in run_cli(url, "key", "list", "acme")[1]
    assert run_cli(url, "key", "revoke", "acme", key_id)[0] == 0
    assert "revoked" in run_cli(url, "key", "list", "acme")[1]
    assert run_cli(url, "tenant", "suspend", "acme") == (0, "tenant/acme suspended\n")
    assert "suspended" in run_cli(url, "tenant", "list")[1]
    missing = run_cli(url, "tenant", "suspend", "nobody")
    assert missing[0] != 0
    assert "does not exist" in missing[1]


def test_watch_reapplies_on_edit_and_symlink_swap(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/db.sqlite"
    migrate(url)
    engine = create_engine_from_url(url)
    factory = create_session_factory(engine)
    # ConfigMap layout: tenants.yaml -> ..data/tenants.yaml, ..data -> ..v1 (swapped atomically)
    for version, concurrent in (("..v1", 1), ("..v2", 4)):
        (tmp_path / version).mkdir()
        (tmp_path / version / "tenants.yaml").write_text(
            f"id: acme\npolicy: {{max_concurrent_jobs: {concurrent}}}\n"
        )
    os.symlink("..v1", tmp_path / "..data")
    watched = tmp_path / "tenants.yaml"
    os.symlink("..data/tenants.yaml", watched)

    seen: list[int] = []
    changed = threading.Event()

    def swap_after_first_apply(_seconds: float) -> None:
        # called by the watcher between polls: swap the ConfigMap once, like kubelet does
        if len(seen) == 1 and not changed.is_set():
            os.symlink("..v2", tmp_path / "..data_tmp")
            os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
            changed.set()

    for _ in watch_changes(
        watched, interval=0.0, should_stop=lambda: len(seen) >= 2, sleep=swap_after_first_apply
    ):
        apply_file(factory, watched, "cli:test")
        with factory() as session:
            seen.append(TenancyService(session).get_policy("acme").max_concurrent_jobs)
    engine.dispose()
    assert seen == [1, 4]


def test_watch_command_applies_then_picks_up_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ``--watch`` command in a thread, stopped by its KeyboardInterrupt path."""
    url = f"sqlite:///{tmp_path}/db.sqlite"
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text("id: acme\npolicy: {max_concurrent_jobs: 1}\n")
    migrate(url)
    engine = create_engine_from_url(url)
    factory = create_session_factory(engine)

    def concurrency() -> int | None:
        with factory() as session:
            tenant = TenancyService(session).repository.get_tenant("acme")
            return None if tenant is None else tenant.policy.max_concurrent_jobs

    import facegate.cli.tenant as tenant_cli

    real_watch = tenant_cli.watch_changes
    stop = threading.Event()

    def bounded_watch(path: Path, interval: float = 2.0):  # type: ignore[no-untyped-def]
        return real_watch(
            path, interval=0.05, should_stop=stop.is_set, sleep=lambda s: stop.wait(s)
        )

    monkeypatch.setattr(tenant_cli, "watch_changes", bounded_watch)
    try:
        thread = threading.Thread(
            target=run_cli, args=(url, "tenant", "apply", "-f", str(tenants), "--watch")
        )
        thread.start()
        for _ in range(200):
            if concurrency() == 1:
                break
            stop.wait(0.05)
        tenants.write_text("id: acme\npolicy: {max_concurrent_jobs: 7}\n")
        for _ in range(200):
            if concurrency() == 7:
                break
            stop.wait(0.05)
        result = concurrency()
    finally:
        stop.set()
        thread.join(timeout=10)
        engine.dispose()
    assert result == 7

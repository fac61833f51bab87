"""The operator commands as the README prints them: ``key create --scopes a,b`` (and the
repeated ``--scope``), ``tenant apply -f examples/tenants.yaml`` leaving other tenants alone,
``models list`` with its header and the built-in swapper."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

from click.testing import CliRunner, Result
from tests.docs.docblocks import ROOT

from facegate.cli import main
from facegate.cli.demo import DEMO_POLICY, ensure_demo
from facegate.database import (
    create_engine_from_url,
    create_session_factory,
    migrate,
    session_scope,
)
from facegate.settings import Settings
from facegate.tenancy.service import TenancyService


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def scopes_of(url: str, tenant_id: str) -> list[list[str]]:
    engine = create_engine_from_url(url)
    try:
        with session_scope(create_session_factory(engine)) as session:
            return [list(key.scopes) for key in TenancyService(session).list_keys(tenant_id)]
    finally:
        engine.dispose()


def test_key_scopes_as_a_comma_list_or_repeated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/facegate.db"
    db = ["--database-url", url]
    applied = invoke("tenant", "apply", "-f", str(ROOT / "examples/tenants.yaml"), *db)
    assert applied.exit_code == 0, applied.output
    comma = invoke("key", "create", "acme", "--scopes", "jobs:write,jobs:read", *db)
    repeated = invoke("key", "create", "acme", "--scope", "usage:read", "--scope", "jobs:read", *db)
    unknown = invoke("key", "create", "acme", "--scopes", "jobs:write,jobs:delete", *db)
    assert comma.exit_code == 0, comma.output
    assert repeated.exit_code == 0, repeated.output
    assert comma.stdout.startswith("fg_")
    assert sorted(map(sorted, scopes_of(url, "acme"))) == [
        ["jobs:read", "jobs:write"],
        ["jobs:read", "usage:read"],
    ]
    assert unknown.exit_code == 2
    assert "unknown scope 'jobs:delete'; choose from jobs:write, jobs:read" in unknown.output


def test_example_tenants_apply_and_leave_the_demo_plan_alone(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None, database_url=f"sqlite:///{tmp_path}/f.db", data_dir=tmp_path
    )  # type: ignore[call-arg]
    migrate(settings.database_url)
    ensure_demo(settings)
    db = ["--database-url", settings.database_url]
    applied = invoke("tenant", "apply", "-f", str(ROOT / "examples/tenants.yaml"), *db)
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines() == ["tenant/studio-pro-01 created", "tenant/acme created"]
    shown = {
        name: json.loads(invoke("tenant", "show", name, *db).stdout)["policy"]
        for name in ("studio-pro-01", "acme", "demo")
    }
    # The specification's document: gpu_limit, enable_enhance and output_resolution mapped.
    assert shown["studio-pro-01"]["device_limit"] == 2
    assert shown["studio-pro-01"]["max_output_resolution"] == "4k"
    assert {"face_enhancer", "frame_enhancer"} <= set(shown["studio-pro-01"]["allowed_processors"])
    assert shown["acme"]["require_consent"] is True
    assert shown["demo"]["allowed_processors"] == sorted(DEMO_POLICY.allowed_processors)
    assert shown["demo"]["max_output_resolution"] == DEMO_POLICY.max_output_resolution


def test_models_list_has_a_header_and_the_builtin_swapper(tmp_path: Path) -> None:
    listed = invoke("models", "list", "--models-dir", str(tmp_path))
    assert listed.exit_code == 0, listed.output
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "TAG", "KIND", "OWNER", "SIZE", "LICENCE"]
    assert any(row.split()[:4] == ["mesh_warp", "-", "face_swapper", "builtin"] for row in rows)
    as_json = invoke("models", "list", "--models-dir", str(tmp_path), "--json")
    names = [json.loads(line)["name"] for line in as_json.stdout.splitlines()]
    assert "mesh_warp" in names
    assert "open_nsfw" in names


def test_serve_and_api_say_when_their_port_is_taken(tmp_path: Path) -> None:
    env = {
        "FACEGATE_DATABASE_URL": f"sqlite:///{tmp_path}/f.db",
        "FACEGATE_DATA_DIR": str(tmp_path),
    }
    umask = os.umask(0o022)  # serve and api set their own (owner-only files): put it back
    os.umask(umask)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        for command in (["serve", "--demo"], ["api"]):
            try:
                result = CliRunner().invoke(main, [*command, "--port", port], env=env)
            finally:
                os.umask(umask)
            assert result.exit_code == 1, result.output
            assert f"cannot listen on 127.0.0.1:{port}" in result.output
            assert "--port or FACEGATE_PORT" in result.output


def test_deploy_overlay_refuses_a_flag_the_database_contradicts(tmp_path: Path) -> None:
    """The policy numbers come from the database; a flag saying otherwise used to be dropped
    in silence (the README's `deploy overlay --device-limit 2` did nothing)."""
    k8s = tmp_path / "k8s"
    shutil.copytree(ROOT / "deploy" / "k8s", k8s)
    env = {"FACEGATE_DATABASE_URL": f"sqlite:///{tmp_path}/f.db"}
    runner = CliRunner()
    applied = runner.invoke(
        main, ["tenant", "apply", "-f", str(ROOT / "examples/tenants.yaml")], env=env
    )
    assert applied.exit_code == 0, applied.output
    overlay = ["deploy", "overlay", "--k8s-root", str(k8s), "--tenant", "studio-pro-01"]
    refused = runner.invoke(main, [*overlay, "--device-limit", "3"], env=env)
    agreed = runner.invoke(main, [*overlay, "--device-limit", "2"], env=env)
    assert refused.exit_code == 2
    assert (
        "--device-limit 3 contradicts the policy of 'studio-pro-01' in the database"
        in refused.output
    )
    assert "(device_limit 2)" in refused.output
    assert agreed.exit_code == 0, agreed.output

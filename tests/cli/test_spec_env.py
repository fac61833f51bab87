"""The specification's environment names (TENANT_ID, MODEL_PATH, OUTPUT_DIR, MODEL_TAG) work
for every command: translated to FACEGATE_* at the CLI's entry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from facegate.cli import COMMANDS, main

PRINT_ENV = "tests.cli.test_spec_env:print_env"


@click.command()
def print_env() -> None:
    for name in ("FACEGATE_WORKER_TENANTS", "FACEGATE_MODELS_DIR", "FACEGATE_MODEL_TAG"):
        click.echo(f"{name}={os.environ.get(name, '')}")
    from facegate.settings import get_settings

    settings = get_settings()
    click.echo(f"settings.storage_url={settings.storage_url}")
    click.echo(f"settings.model_tag={settings.model_tag}")


def run_cli(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from facegate.cli import COMMANDS, main; "
        f"COMMANDS['print-env'] = {PRINT_ENV!r}; sys.exit(main(['print-env']))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FACEGATE_")}
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "PYTHONPATH": str(root), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_specification_names_reach_settings_and_options() -> None:
    done = run_cli(
        {
            "TENANT_ID": "tenant-a",
            "MODEL_PATH": "/models/tenant-a/",
            "OUTPUT_DIR": "/storage/output/tenant-a",
            "MODEL_TAG": "v2",
        }
    )
    assert done.returncode == 0, done.stderr
    lines = set(done.stdout.splitlines())
    assert "FACEGATE_WORKER_TENANTS=tenant-a" in lines
    assert "FACEGATE_MODELS_DIR=/models/tenant-a" in lines
    assert "settings.storage_url=file:///storage/output/tenant-a" in lines
    assert "settings.model_tag=v2" in lines


def test_a_contradiction_stops_with_a_usage_error() -> None:
    done = run_cli({"TENANT_ID": "tenant-a", "FACEGATE_WORKER_TENANTS": "tenant-b"})
    assert done.returncode == 2
    assert "TENANT_ID='tenant-a' contradicts FACEGATE_WORKER_TENANTS='tenant-b'" in done.stderr


def test_help_lists_every_registered_command() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output

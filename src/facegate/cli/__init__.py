"""The ``facegate`` command line.

Each command lives in its own module of this package and is registered in ``COMMANDS``;
modules are imported lazily so ``facegate --help`` stays fast and a command's heavy
imports (mediapipe, FastAPI) load only when that command runs.
"""

from __future__ import annotations

import importlib
import os

import click

from facegate.allocator import tune_allocator
from facegate.deploy.env import SpecEnvError, apply_spec_env
from facegate.errors import InvalidSettings, SchemaNotCurrent
from facegate.observability.nativelog import install_noise_filter

# name -> "module:attribute" of a click command or group
COMMANDS: dict[str, str] = {
    "api": "facegate.cli.api:api",
    "audit": "facegate.cli.audit:audit",
    "bans": "facegate.cli.bans:bans",
    "db": "facegate.cli.db:db",
    "deploy": "facegate.cli.deploy:deploy",
    "jobs": "facegate.cli.jobs:jobs",
    "key": "facegate.cli.key:key",
    "models": "facegate.cli.models:models",
    "provenance": "facegate.cli.provenance:provenance",
    "receipt": "facegate.cli.receipt:receipt",
    "serve": "facegate.cli.serve:serve",
    "storage": "facegate.cli.storage:storage",
    "stream-check": "facegate.cli.stream_check:stream_check",
    "swap": "facegate.cli.swap:swap",
    "tenant": "facegate.cli.tenant:tenant",
    "usage": "facegate.cli.usage:usage",
    "verify": "facegate.cli.provenance:verify",
    "worker": "facegate.cli.worker:worker",
}


class BadSetting(click.ClickException):
    """A bad FACEGATE_* value: one line naming it, exit status 2 like a bad flag."""

    exit_code = 2


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> object:
        # A schema this process may not migrate (FACEGATE_SCHEMA_ON_START=check) is an
        # operator's error with a clear next step, not a traceback.
        try:
            return super().invoke(ctx)
        except SchemaNotCurrent as exc:
            raise click.ClickException(str(exc)) from None
        except InvalidSettings as exc:
            raise BadSetting(str(exc)) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="facegate")
def main() -> None:
    """facegate: multi-tenant face swap (engine, service, workers, operations).

    Settings are FACEGATE_* environment variables; the specification's TENANT_ID, MODEL_PATH,
    OUTPUT_DIR and MODEL_TAG are accepted as their FACEGATE_* equivalents.
    """
    # Frame-sized buffers reuse heap memory instead of faulting in fresh pages per frame
    # (facegate.allocator): set once, at the process's entry, for every command.
    tune_allocator()
    # Translated here, at the process's entry, so every command's options and Settings see
    # them; a contradiction with an explicit FACEGATE_* value stops with a clear message.
    try:
        os.environ.update(apply_spec_env())
    except SpecEnvError as exc:
        raise click.UsageError(str(exc)) from None
    # optional: pydantic-settings costs 0.3 s, which `facegate --help` does not pay
    from facegate.settings import get_settings

    try:
        native_logs = get_settings().native_logs
    except ValueError:  # pydantic's ValidationError: the command that needs them says
        native_logs = False
    if not native_logs:
        # mediapipe's absl/TFLite lines on fd 2, filtered for the whole process.
        install_noise_filter()

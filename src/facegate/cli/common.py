"""Helpers shared by CLI commands: settings from FACEGATE_*, a migrated database."""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import click
from sqlalchemy.orm import Session

from facegate.database import (
    SessionFactory,
    create_engine_from_url,
    create_session_factory,
    prepare_schema,
    session_scope,
)
from facegate.errors import ServiceError
from facegate.settings import Settings, get_settings


def database_option(function: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--database-url",
        default=None,
        help="Database URL (default: FACEGATE_DATABASE_URL or sqlite:///./var/facegate.db).",
    )(function)


def cli_actor() -> str:
    """Who runs this command, as the audit trail names it: ``cli:<os user>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        user = f"uid{os.getuid()}"
    return f"cli:{user}"


def load_settings(database_url: str | None = None) -> Settings:
    return get_settings(database_url=database_url)


@contextmanager
def open_database(settings: Settings) -> Iterator[SessionFactory]:
    """Migrate (or check, per FACEGATE_SCHEMA_ON_START), then hand out a session factory;
    the engine is disposed afterwards."""
    prepare_schema(settings.database_url, settings.schema_on_start)
    engine = create_engine_from_url(settings.database_url)
    try:
        yield create_session_factory(engine)
    finally:
        engine.dispose()


@contextmanager
def transaction(database_url: str | None) -> Iterator[Session]:
    """One committed transaction on the configured database; problems become CLI errors."""
    with open_database(load_settings(database_url)) as factory:
        try:
            with session_scope(factory) as session:
                yield session
        except ServiceError as exc:
            raise click.ClickException(exc.detail) from exc


# Owner-only files: the SQLite database, stored inputs and results, models, scratch space.
PRIVATE_UMASK = 0o077


def private_files() -> None:
    """Make every file this server process creates readable by its own user only (0600
    files, 0700 folders): tenants' photos and the database are nobody else's business on
    a shared machine. Called by the server commands (serve, api, worker), not by
    ``facegate swap``, whose output is the user's own file."""
    os.umask(PRIVATE_UMASK)


def require_free_port(host: str, port: int) -> None:
    """Stop with a clear message when the port is taken (``make serve`` and ``make cluster``
    both want 8000) instead of a bind error among the log lines after start-up."""
    try:
        socket.create_server((host, port)).close()
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc} (another `facegate serve` "
            "or `make cluster`?); stop it, or choose another port with --port or FACEGATE_PORT"
        ) from None

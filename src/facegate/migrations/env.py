"""Alembic environment: runs on the connection facegate.database.migrate hands over, or on
one built from ``sqlalchemy.url`` when the ``alembic`` command line is used."""

from __future__ import annotations

import importlib

from alembic import context
from sqlalchemy.engine import Connection

from facegate.database import Base, create_engine_from_url

# Every module that declares tables; imported so autogenerate sees the whole schema.
MODEL_MODULES = (
    "facegate.tenancy.tables",
    "facegate.jobs.tables",
    "facegate.storage.tables",
    "facegate.usage.tables",
    "facegate.observability.audit.tables",
    "facegate.consent.tables",
    "facegate.provenance.tables",
    "facegate.webhooks.tables",
    "facegate.library.tables",
    "facegate.batches.tables",
    "facegate.templates.tables",
    "facegate.takedown.tables",
    "facegate.streams.tables",
)

for module_name in MODEL_MODULES:
    try:
        importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise

config = context.config
target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_on(connection)
        return
    engine = create_engine_from_url(config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.begin() as new_connection:
            run_on(new_connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()

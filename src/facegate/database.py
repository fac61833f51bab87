"""The database layer shared by every domain package: the declarative ``Base`` and its column
types (``UtcDateTime``), and the engine, sessions and migrations built from one database URL.

SQLite (embedded shape) gets WAL, foreign keys and a busy timeout on every connection;
PostgreSQL (cluster shape) is reached with ``postgresql+psycopg://``. The schema is created
only by the Alembic migrations in ``facegate/migrations``, never by ``create_all``, so SQLite
and PostgreSQL always have the same schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Connection,
    DateTime,
    Dialect,
    Engine,
    MetaData,
    Table,
    create_engine,
    event,
    insert,
    inspect,
    text,
)
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

from facegate.errors import SchemaNotCurrent
from facegate.resilience import CircuitBreaker

SessionFactory = sessionmaker[Session]

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def utcnow() -> datetime:
    """Timezone-aware now in UTC (stored as such on PostgreSQL, naive-UTC on SQLite)."""
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python, whatever the backend.

    SQLite has no time zone type and hands back naive values; comparing those with
    ``utcnow()`` would raise, so values are normalised to UTC on the way in and tagged UTC on
    the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UtcDateTime column; use utcnow()")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


SQLITE_BUSY_TIMEOUT_MS = 15_000


def normalise_url(url: str) -> str:
    """Route plain ``postgresql://`` URLs to psycopg 3, the only driver installed."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _prepare_sqlite_file(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling issues BEGIN lazily and never for DDL; turning it
    # off and emitting BEGIN ourselves (below) gives SQLAlchemy real transactions, which the
    # job claim relies on (BEGIN IMMEDIATE in facegate.jobs).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


#: How SQLite transactions begin unless ``sqlite_begin`` says otherwise. In WAL mode a
#: DEFERRED transaction that reads and then writes fails at once with "database is locked"
#: (SQLITE_BUSY_SNAPSHOT, which busy_timeout does not wait out) whenever another connection
#: committed in between: two API requests, or a request and a worker, hit it under load.
#: IMMEDIATE takes the write lock at BEGIN, so such transactions queue (busy_timeout) instead
#: of failing. Paths that only read opt into DEFERRED (``READ_ONLY``) and run concurrently.
SQLITE_DEFAULT_BEGIN = "IMMEDIATE"
READ_ONLY = {"sqlite_begin": "DEFERRED"}
#: A connection that only reads, a statement at a time (the polling route): on SQLite no
#: BEGIN and no ROLLBACK, each statement is its own transaction (its snapshot consistent
#: within itself); two round trips less per poll. Elsewhere the same as READ_ONLY.
SINGLE_READS = {"sqlite_begin": "NONE"}


def _on_sqlite_begin(connection: Any) -> None:
    mode = str(connection.get_execution_options().get("sqlite_begin", SQLITE_DEFAULT_BEGIN)).upper()
    if mode == "NONE":
        return
    if mode not in {"DEFERRED", "IMMEDIATE", "EXCLUSIVE"}:
        raise ValueError(f"unknown sqlite_begin mode {mode!r}")
    connection.exec_driver_sql(f"BEGIN {mode}")


def create_engine_from_url(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url`` with the per-backend settings this service relies on."""
    url = normalise_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        _prepare_sqlite_file(url)
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 15}, **kwargs
        )
        event.listen(engine, "connect", configure_sqlite_connection)
        event.listen(engine, "begin", _on_sqlite_begin)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def create_session_factory(engine: Engine) -> SessionFactory:
    # expire_on_commit=False: objects returned by a service stay readable after the edge
    # commits (responses are rendered after the transaction ends).
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: SessionFactory, *, read_only: bool = False) -> Iterator[Session]:
    """One transaction owned by the caller (a request, a CLI command, a worker step):
    commit when the block succeeds, roll back when it raises. ``read_only`` lets SQLite run
    it beside writers (see SQLITE_DEFAULT_BEGIN); it must then not write."""
    session = factory()
    if read_only:
        session.connection(execution_options=READ_ONLY)  # applied before BEGIN
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


class _DriverInsert:
    """``INSERT INTO table (every column) VALUES (...)`` compiled once per dialect, run on
    the driver connection under a session's Core connection with SQLAlchemy's own bind
    processors of each column's type (what a Core execution applies): ~1/4 of a Core
    execution's CPU. The engine's ``before/after_cursor_execute`` listeners see it (with
    ``conn`` and ``context`` None); a driver error is raised as SQLAlchemy's
    (``IntegrityError`` and its kin)."""

    def __init__(self, table: Table, dialect: Dialect) -> None:
        keys = [column.key for column in table.columns]
        compiled = insert(table).compile(dialect=dialect, column_keys=keys)
        self.sql = compiled.string
        processors = {
            column.key: column.type.dialect_impl(dialect).bind_processor(dialect)
            for column in table.columns
        }
        names = {bind.key: compiled.bind_names[bind] for bind in compiled.binds.values()}
        # (column key, the statement's parameter name, its bind processor) in the
        # statement's order; a qmark statement takes a tuple in that order.
        order = list(compiled.positiontup or []) if compiled.positional else list(names.values())
        by_name = {name: key for key, name in names.items()}
        self.columns = [(by_name[name], name, processors[by_name[name]]) for name in order]
        self.positional = bool(compiled.positional)

    def parameters(self, values: dict[str, Any]) -> Any:
        bound = [
            (name, value if process is None or value is None else process(value))
            for key, name, process in self.columns
            for value in (values[key],)
        ]
        if self.positional:
            return tuple(value for _name, value in bound)
        return dict(bound)

    def run(self, connection: Connection, rows: list[dict[str, Any]]) -> None:
        engine = connection.engine
        parameters = [self.parameters(values) for values in rows]
        many = len(parameters) > 1
        dbapi = engine.dialect.loaded_dbapi
        cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            sent: Any = parameters if many else parameters[0]
            dispatch = engine.dispatch
            for listener in dispatch.before_cursor_execute:
                listener(None, cursor, self.sql, sent, None, many)
            try:
                if many:
                    cursor.executemany(self.sql, parameters)
                else:
                    cursor.execute(self.sql, parameters[0])
            except dbapi.Error as exc:
                raise DBAPIError.instance(
                    self.sql, sent, exc, dbapi.Error, dialect=engine.dialect
                ) from exc
            for listener in dispatch.after_cursor_execute:
                listener(None, cursor, self.sql, sent, None, many)
        finally:
            cursor.close()


_INSERTS: dict[tuple[Table, str], _DriverInsert] = {}


def insert_rows(session: Session, rows: Sequence[Any]) -> None:
    """Insert new mapped objects in ``session``'s transaction, one INSERT per table in the
    order the tables first appear (several rows of a table in one executemany), compiled
    once and run on the driver connection under the session's (:class:`_DriverInsert`),
    instead of the unit of work's flush (~5x the CPU for one row).

    For rows nothing reads back through the session (a submitted job and its ledger rows):
    the objects stay transient (not in the session, no identity), with every column's
    Python-side default (``default=``) set on them, so they read as a flushed object
    would. A column with only a server-side default is refused, as are objects already in
    a session."""
    by_table: dict[Table, list[dict[str, Any]]] = {}
    for row in rows:
        state = inspect(row)
        if not state.transient:
            raise ValueError(f"insert_rows takes new objects only, not {row!r}")
        values: dict[str, Any] = {}
        given = row.__dict__
        for prop in state.mapper.column_attrs:
            column = prop.columns[0]
            if prop.key in given:
                value = given[prop.key]
            else:
                default = column.default
                if default is None:
                    if column.server_default is not None:
                        raise ValueError(f"{column} has a server-side default only")
                    value = None
                elif default.is_scalar:
                    value = default.arg
                elif default.is_callable:
                    value = default.arg(None)
                else:
                    raise ValueError(f"{column}'s default is not a Python value")
                # Straight into the instance's dict: a transient object that no session
                # will flush needs no change history (setattr's instrumentation cost).
                given[prop.key] = value
            values[column.key] = value
        by_table.setdefault(state.mapper.local_table, []).append(values)
    connection = session.connection()
    dialect = connection.dialect
    for table, params in by_table.items():
        statement = _INSERTS.get((table, dialect.name))
        if statement is None:
            statement = _INSERTS[(table, dialect.name)] = _DriverInsert(table, dialect)
        statement.run(connection, params)


def alembic_config(url: str) -> Any:
    """The Alembic configuration of the installed package, pointed at ``url``."""
    package_dir = resources.files("facegate")
    config = Config(str(package_dir / "alembic.ini"))
    config.set_main_option("script_location", str(package_dir / "migrations"))
    # ConfigParser interpolation would eat a '%' in passwords.
    config.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    return config


#: The PostgreSQL advisory lock every migration holds (``pg_advisory_xact_lock``): processes
#: that start together, or a migration Job beside them, run the upgrade one after the other;
#: the later ones find the schema at head and do nothing. The number is "facegate" in ASCII.
MIGRATION_LOCK_KEY = 0x66616365676174
#: How long a migration waits for another one to finish before it gives up.
MIGRATION_LOCK_TIMEOUT = "5min"


def migrate(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (``alembic upgrade head``), holding the
    migration lock on PostgreSQL (SQLite serialises it with ``BEGIN IMMEDIATE``)."""
    config = alembic_config(url)
    engine = create_engine_from_url(url)
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                # Both are released when this transaction (which holds the DDL) ends.
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'")
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def head_revision() -> str:
    """The newest revision this release's migrations know."""
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


def check_schema(url: str) -> str:
    """The database's revision when it is this release's head; else :class:`SchemaNotCurrent`
    saying what to run."""
    current, head = current_revision(url), head_revision()
    if current != head:
        raise SchemaNotCurrent(
            f"the database is at revision {current or 'none (never migrated)'}, this release "
            f"needs {head}; run `facegate db upgrade` (or set FACEGATE_SCHEMA_ON_START=migrate)"
        )
    return current


def prepare_schema(url: str, mode: str) -> None:
    """What a starting process does with the schema: ``migrate`` (under the lock) or
    ``check`` (refuse an old or unknown one)."""
    if mode == "migrate":
        migrate(url)
    elif mode == "check":
        check_schema(url)
    else:
        raise ValueError(f"unknown schema_on_start mode {mode!r}")


def current_revision(url: str) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    engine = create_engine_from_url(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def guard_engine(engine: Engine, breaker: CircuitBreaker) -> None:
    """Put a SQLAlchemy engine's connections behind ``breaker``.

    The gate sits where a *new* DBAPI connection is made (``do_connect``): a disconnect
    invalidates the whole pool, so while the database is down every checkout reaches it,
    and an open breaker refuses there before any network work. Connectivity errors
    (``OperationalError``/``InterfaceError``, or anything SQLAlchemy classes as a
    disconnect) count as failures; a successful connect or statement counts as success.
    """

    def gate(*_args: Any) -> None:
        breaker.before_call()

    def on_error(context: ExceptionContext) -> None:
        if getattr(context, "is_pre_ping", False):
            return  # the connect that follows a failed ping reports for itself
        error = context.sqlalchemy_exception
        if context.is_disconnect or isinstance(error, OperationalError | InterfaceError):
            breaker.record_failure()

    def on_success(*_args: Any) -> None:
        breaker.record_success()

    event.listen(engine, "do_connect", gate)
    event.listen(engine, "handle_error", on_error)
    event.listen(engine, "after_cursor_execute", on_success)
    event.listen(engine.pool, "connect", on_success)

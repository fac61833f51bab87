"""Prepared reads: a Core ``SELECT`` compiled once per database dialect and run on the
driver's connection, for the hottest reads of the API (the job poll, a submission's).

Through a Core ``Connection`` one indexed single-row read costs ~80-200 µs of CPU (the
statement cache lookup, the execution context, the result's metadata); through the driver
~10-15 µs. The conversion of values is SQLAlchemy's own: each bound value goes through its
type's bind processor and each column through its type's result processor for the dialect
(``TypeEngine.dialect_impl(dialect)``), the very functions a Core execution applies, so a
row reads the same on SQLite and PostgreSQL as through Core (``tests/test_prepared.py``
compares them column by column on both).

:class:`ReadPath` runs them for a request:

- **SQLite**: on the event loop, on a connection of its own (opened like the engine's, with
  ``busy_timeout`` 0), each statement its own transaction like ``database.SINGLE_READS``.
  A primary-key read of a WAL database never waits on a writer, so this costs less than
  the worker-thread hop alone; should SQLite ever answer busy (or anything else go
  wrong), the read is run again the ordinary way, in a worker thread through Core, which
  waits, translates errors and reports to the circuit breaker as every other statement.
- **PostgreSQL** (network I/O, never on the loop): in a worker thread on a pooled
  connection (pre-ping, reset on return and the breaker's gate as for every checkout);
  a driver error invalidates the connection and runs the read again through Core.

In a request's own transaction (:meth:`PreparedRead.run_in`: a submission's policy stamp
and its queue-cap-and-quota reading) the statement runs on the driver connection under the
session's Core connection, in that transaction; a driver error is raised as SQLAlchemy's
and nothing is run again (on PostgreSQL a failed statement aborts the transaction anyway).

A statement binds its own literals (``status == "queued"``, SQLite's ``OFFSET 0``) as
Core would; one whose SQL depends on its values (an expanding ``IN``, a literal-execute
``LIMIT``) is never prepared: it runs through Core, decided before anything runs.

Listeners of the engine's ``before_cursor_execute``/``after_cursor_execute`` events see a
prepared read like any statement (with ``conn`` and ``context`` None): the breaker counts
its success, and the statement-count tests count it.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from sqlalchemy import Connection, Engine, Select
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from facegate.database import SINGLE_READS, configure_sqlite_connection

Processor = Callable[[Any], Any]


@dataclass
class _Compiled:
    sql: str
    positional: tuple[str, ...] | None  # bind names in order (qmark), None: named params
    binds: Mapping[str, Callable[[Any], Any] | None]
    # The values the statement itself binds (``column == "running"``), by bind name.
    values: Mapping[str, Any]
    results: list[Processor | None] | None = None  # from the first cursor's description


class NotPrepared(Exception):
    """The statement's SQL depends on its values: run it through Core."""


class PreparedRead:
    """One ``SELECT`` compiled once per dialect; rows are named tuples with the statement's
    column keys (the attributes a Core ``Row`` has). A statement whose compiled form
    depends on its values (literal-execute or expanding parameters: a ``LIMIT`` bound
    as a literal, an ``IN`` list) is not prepared: it always runs through Core, decided
    before anything runs (never tried on the driver first and run again)."""

    def __init__(self, statement: Select[Any]) -> None:
        self.statement = statement
        self.Row: Any = namedtuple("Row", list(statement.selected_columns.keys()), rename=True)  # type: ignore[misc]
        self._compiled: dict[str, _Compiled | None] = {}

    def _compile(self, dialect: Dialect) -> _Compiled | None:
        compiled = self.statement.compile(dialect=dialect)
        if compiled.literal_execute_params or compiled.post_compile_params:
            self._compiled[dialect.name] = None
            return None
        named = [
            (compiled.escaped_bind_names.get(name, name), bind)
            for bind, name in compiled.bind_names.items()
        ]
        binds = {
            name: bind.type.dialect_impl(dialect).bind_processor(dialect) for name, bind in named
        }
        values = {name: bind.effective_value for name, bind in named if not bind.required}
        positional = tuple(compiled.positiontup or ()) if compiled.positional else None
        found = self._compiled[dialect.name] = _Compiled(compiled.string, positional, binds, values)
        return found

    def prepared_for(self, dialect: Dialect) -> _Compiled | None:
        """The statement compiled for ``dialect``; None when it cannot be prepared."""
        name = dialect.name
        if name in self._compiled:
            return self._compiled[name]
        return self._compile(dialect)

    def run(self, engine: Engine, dbapi_connection: Any, params: Mapping[str, Any]) -> Any:
        """Execute on a driver connection; the row (converted), or None. A statement that
        cannot be prepared raises :class:`NotPrepared` before anything runs."""
        compiled = self.prepared_for(engine.dialect)
        if compiled is None:
            raise NotPrepared(str(self.statement))
        rows = self._execute(engine, compiled, dbapi_connection, params, every=False)
        return rows[0] if rows else None

    def run_in(self, session: Session, params: Mapping[str, Any], *, every: bool = False) -> Any:
        """Execute in ``session``'s transaction (begun if it was not), on the driver
        connection under its Core connection: the first row (converted) or None, or with
        ``every`` the list of rows. A statement that cannot be prepared runs through that
        Core connection instead, decided before it runs: it runs once. A driver error is
        raised as SQLAlchemy's (``DBAPIError`` and its kin), as a Core execution raises it;
        the caller's transaction then rolls back as for any failed statement."""
        connection = session.connection()
        engine = connection.engine
        compiled = self.prepared_for(engine.dialect)
        if compiled is None:
            result = connection.execute(self.statement, dict(params))
            found = [self.Row._make(row) for row in result]
            return found if every else (found[0] if found else None)
        dbapi_connection = connection.connection.dbapi_connection
        dbapi = engine.dialect.loaded_dbapi
        try:
            rows = self._execute(engine, compiled, dbapi_connection, params, every=every)
        except dbapi.Error as exc:
            raise DBAPIError.instance(
                compiled.sql, dict(params), exc, dbapi.Error, dialect=engine.dialect
            ) from exc
        return rows if every else (rows[0] if rows else None)

    def _execute(
        self,
        engine: Engine,
        compiled: _Compiled,
        dbapi_connection: Any,
        params: Mapping[str, Any],
        *,
        every: bool,
    ) -> list[Any]:
        dialect = engine.dialect
        if compiled.values:
            params = {**compiled.values, **params}
        bound = {
            name: value if (process := compiled.binds.get(name)) is None else process(value)
            for name, value in params.items()
        }
        parameters: Any = (
            bound
            if compiled.positional is None
            else tuple(bound[name] for name in compiled.positional)
        )
        cursor = dbapi_connection.cursor()
        try:
            dispatch = engine.dispatch
            for listener in dispatch.before_cursor_execute:
                listener(None, cursor, compiled.sql, parameters, None, False)
            cursor.execute(compiled.sql, parameters)
            # fetchall: the statement is finished (SQLite would otherwise hold its read
            # snapshot, and WAL checkpoints would wait, until the cursor is collected).
            rows = cursor.fetchall()
            for listener in dispatch.after_cursor_execute:
                listener(None, cursor, compiled.sql, parameters, None, False)
            if compiled.results is None:
                compiled.results = [
                    column.type.dialect_impl(dialect).result_processor(dialect, described[1])
                    for column, described in zip(
                        self.statement.selected_columns, cursor.description, strict=True
                    )
                ]
        finally:
            cursor.close()
        processors = compiled.results
        make = self.Row._make
        return [
            make(
                value if process is None or value is None else process(value)
                for process, value in zip(processors, row, strict=True)
            )
            for row in (rows if every else rows[:1])
        ]


class ReadPath:
    """Where an app's prepared reads run (see the module's docstring); ``close`` at
    shutdown."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        database = engine.url.database or ""
        # An in-memory database is one per connection: it is read through the pool.
        in_memory = database in ("", ":memory:") or "mode=memory" in database
        self.on_loop = engine.dialect.name == "sqlite" and not in_memory
        self._loop_connection: Any = None

    def _connection(self) -> Any:
        if self._loop_connection is None:
            dialect = self.engine.dialect
            args, kwargs = dialect.create_connect_args(self.engine.url)
            # Used on the loop's thread only; closed at shutdown, maybe from another.
            kwargs["check_same_thread"] = False
            connection = dialect.dbapi.connect(*args, **kwargs)  # type: ignore[union-attr]
            configure_sqlite_connection(connection, None)
            # Never wait on the event loop: a busy database is read in a worker thread.
            connection.execute("PRAGMA busy_timeout=0")
            self._loop_connection = connection
        return self._loop_connection

    async def first(
        self,
        read: PreparedRead,
        params: Mapping[str, Any],
        fallback: Callable[[Connection], Any],
    ) -> Any:
        """``read``'s row or None; ``fallback`` (the same read through Core, on a
        connection) when the prepared read could not run, or cannot be prepared (then it is
        the only one run)."""
        if read.prepared_for(self.engine.dialect) is None:
            return await self._through_core(fallback)
        if self.on_loop:
            try:
                return read.run(self.engine, self._connection(), params)
            except Exception:
                self.close()  # whatever went wrong, the next read opens afresh
                return await self._through_core(fallback)
        return await anyio.to_thread.run_sync(self._pooled, read, params, fallback)

    def _pooled(
        self, read: PreparedRead, params: Mapping[str, Any], fallback: Callable[[Connection], Any]
    ) -> Any:
        fairy = self.engine.raw_connection()
        try:
            return read.run(self.engine, fairy.dbapi_connection, params)
        except Exception:
            fairy.invalidate()
        finally:
            fairy.close()
        return self._core(fallback)

    async def _through_core(self, fallback: Callable[[Connection], Any]) -> Any:
        return await anyio.to_thread.run_sync(self._core, fallback)

    def _core(self, fallback: Callable[[Connection], Any]) -> Any:
        with self.engine.connect().execution_options(**SINGLE_READS) as connection:
            return fallback(connection)

    def close(self) -> None:
        if self._loop_connection is not None:
            connection, self._loop_connection = self._loop_connection, None
            connection.close()

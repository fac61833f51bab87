"""Prepared reads: a Core ``SELECT`` compiled once per database dialect and run on the
driver's connection, for the hottest read of the API (the job poll).

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

from facegate.database import SINGLE_READS, configure_sqlite_connection

Processor = Callable[[Any], Any]


@dataclass
class _Compiled:
    sql: str
    positional: tuple[str, ...] | None  # bind names in order (qmark), None: named params
    binds: Mapping[str, Callable[[Any], Any] | None]
    results: list[Processor | None] | None = None  # from the first cursor's description


class PreparedRead:
    """One ``SELECT`` of a single row (or none), compiled once per dialect; rows are named
    tuples with the statement's column keys (the attributes a Core ``Row`` has)."""

    def __init__(self, statement: Select[Any]) -> None:
        self.statement = statement
        self.Row: Any = namedtuple("Row", list(statement.selected_columns.keys()))  # type: ignore[misc]
        self._compiled: dict[str, _Compiled] = {}

    def _compile(self, dialect: Dialect) -> _Compiled:
        compiled = self.statement.compile(dialect=dialect)
        assert not compiled.literal_execute_params
        assert not compiled.post_compile_params
        binds = {
            compiled.escaped_bind_names.get(name, name): bind.type.dialect_impl(
                dialect
            ).bind_processor(dialect)
            for name, bind in compiled.binds.items()
        }
        positional = tuple(compiled.positiontup or ()) if compiled.positional else None
        found = self._compiled[dialect.name] = _Compiled(compiled.string, positional, binds)
        return found

    def run(self, engine: Engine, dbapi_connection: Any, params: Mapping[str, Any]) -> Any:
        """Execute on a driver connection; the row (converted), or None."""
        dialect = engine.dialect
        compiled = self._compiled.get(dialect.name) or self._compile(dialect)
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
        if not rows:
            return None
        processors = compiled.results
        return self.Row._make(
            value if process is None or value is None else process(value)
            for process, value in zip(processors, rows[0], strict=True)
        )


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
        connection) when the prepared read could not run."""
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

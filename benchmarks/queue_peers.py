"""The peers of benchmarks/queue_bench.py: PgQueuer and Procrastinate on the same PostgreSQL.

Each peer gets a private schema, the same number of no-op jobs and the same number of
worker processes as facegate's claim; a worker process runs the peer's own worker until
its queue is empty (PgQueuer ``mode=drain``, Procrastinate ``wait=False``). The figure is
jobs / (last job recorded done - first job taken), from the peer's own log in the database
(PgQueuer's ``pgqueuer_log``, Procrastinate's ``procrastinate_events``), the way facegate's
is measured from its jobs' ``started_at`` and ``finished_at``: the workers' start-up and
shutdown are not counted. Neither peer has per-tenant caps or fairness.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from sqlalchemy import make_url

if TYPE_CHECKING:
    import procrastinate


def libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def in_schema(base: str, schema: str) -> str:
    return libpq(base) + ("&" if "?" in base else "?") + f"options=-csearch_path%3D{schema}"


class Schema:
    """A private schema on the server, dropped at exit."""

    def __init__(self, base: str, prefix: str) -> None:
        self.base = base
        self.name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        self.url = in_schema(base, self.name)

    def __enter__(self) -> Schema:
        with psycopg.connect(libpq(self.base), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {self.name}")
        return self

    def __exit__(self, *_: object) -> None:
        with psycopg.connect(libpq(self.base), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {self.name} CASCADE")


def per_second(jobs: int, first: datetime, last: datetime) -> float:
    """``jobs`` over the time from the first one taken to the last one finished."""
    return jobs / (last - first).total_seconds()


def run_workers(target: Callable[..., None], args: tuple[Any, ...], workers: int) -> None:
    """Start ``workers`` processes, release them together, wait until each has drained."""
    ready = mp.Barrier(workers + 1)
    results: Any = mp.Queue()
    procs = [mp.Process(target=target, args=(*args, ready, results)) for _ in range(workers)]
    for proc in procs:
        proc.start()
    ready.wait()
    for _ in procs:
        results.get(timeout=600)
    for proc in procs:
        proc.join(30)


# PgQueuer ---------------------------------------------------------------------------------


def _pgqueuer_worker(url: str, schema: str, batch_size: int, ready: Any, results: Any) -> None:
    asyncio.run(_pgqueuer_work(url, schema, batch_size, ready, results))


async def _pgqueuer_work(url: str, schema: str, batch_size: int, ready: Any, results: Any) -> None:
    import asyncpg
    from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
    from pgqueuer.core.qm import QueueManager
    from pgqueuer.models import Job
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    connection = await asyncpg.connect(libpq(url), server_settings={"search_path": schema})
    manager = QueueManager(Queries(AsyncpgDriver(connection)))

    @manager.entrypoint("noop")
    async def noop(job: Job) -> None:
        return None

    ready.wait()
    await manager.run(
        batch_size=batch_size,
        mode=QueueExecutionMode.drain,
        dequeue_timeout=timedelta(seconds=1),
    )
    results.put("drained")
    await connection.close()


async def _pgqueuer_fill(url: str, schema: str, jobs: int) -> None:
    import asyncpg
    from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
    from pgqueuer.queries import Queries

    connection = await asyncpg.connect(libpq(url), server_settings={"search_path": schema})
    queries = Queries(AsyncpgDriver(connection))
    await queries.install(create_schema=False)
    for start in range(0, jobs, 2000):
        count = min(2000, jobs - start)
        await queries.enqueue(["noop"] * count, [None] * count, [0] * count)
    await connection.execute("VACUUM ANALYZE")
    await connection.close()


def pgqueuer_rate(base: str, jobs: int, workers: int, batch_size: int) -> float:
    """PgQueuer's no-op jobs per second at ``batch_size`` (its dequeue batch)."""
    with Schema(base, "bench_pgq") as schema:
        asyncio.run(_pgqueuer_fill(base, schema.name, jobs))
        run_workers(_pgqueuer_worker, (base, schema.name, batch_size), workers)
        with psycopg.connect(schema.url) as conn:
            left = conn.execute("SELECT count(*) FROM pgqueuer").fetchone()
            first, last, done = conn.execute(
                "SELECT min(created) FILTER (WHERE status = 'picked'), "
                "max(created) FILTER (WHERE status = 'successful'), "
                "count(*) FILTER (WHERE status = 'successful') FROM pgqueuer_log"
            ).fetchone() or (None, None, 0)
        if left is None or left[0] != 0 or done != jobs:
            raise SystemExit(f"pgqueuer: {left} jobs left in the queue, {done} successful")
    return per_second(jobs, first, last)


# Procrastinate ----------------------------------------------------------------------------


def _procrastinate_app(url: str) -> procrastinate.App:
    import procrastinate

    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))


def _procrastinate_worker(url: str, ready: Any, results: Any) -> None:
    asyncio.run(_procrastinate_work(url, ready, results))


async def _procrastinate_work(url: str, ready: Any, results: Any) -> None:
    app = _procrastinate_app(url)

    @app.task(name="noop")
    async def noop() -> None:
        return None

    async with app.open_async():
        ready.wait()
        await app.run_worker_async(wait=False, install_signal_handlers=False)
    results.put("drained")


async def _procrastinate_fill(url: str, jobs: int) -> None:
    app = _procrastinate_app(url)

    @app.task(name="noop")
    async def noop() -> None:
        return None

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        for start in range(0, jobs, 2000):
            await noop.batch_defer_async(*({} for _ in range(min(2000, jobs - start))))


def procrastinate_rate(base: str, jobs: int, workers: int) -> float:
    """Procrastinate's no-op jobs per second (its worker fetches and finishes one at a
    time)."""
    with Schema(base, "bench_pcr") as schema:
        asyncio.run(_procrastinate_fill(schema.url, jobs))
        with psycopg.connect(schema.url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        run_workers(_procrastinate_worker, (schema.url,), workers)
        with psycopg.connect(schema.url) as conn:
            first, last, done = conn.execute(
                "SELECT min(at) FILTER (WHERE type = 'started'), "
                "max(at) FILTER (WHERE type = 'succeeded'), "
                "count(*) FILTER (WHERE type = 'succeeded') FROM procrastinate_events"
            ).fetchone() or (None, None, 0)
        if done != jobs:
            raise SystemExit(f"procrastinate: {done} of {jobs} jobs succeeded")
    return per_second(jobs, first, last)

"""Queue benchmark on PostgreSQL: claim throughput and fairness of the cluster claim.

1. Claims per second, 4 worker processes on no-op jobs (claim, then mark succeeded), with
   the fair claim (``PostgresClaimer``, caps on: per-tenant advisory locks, recount, SKIP
   LOCKED) taking up to BATCH jobs per round trip and finishing them in one statement, the
   same claim one job at a time, and a plain FIFO ``FOR UPDATE SKIP LOCKED`` claim (caps
   off) as the baseline. The FIFO claim and the finish run as prepared statements on plain
   autocommit psycopg connections, the way ``PostgresClaimer`` runs its claim.
2. The peers on the same server in the same run (benchmarks/queue_peers.py): PgQueuer at
   batch_size BATCH and at its default 10, and Procrastinate, with as many worker processes;
   facegate's batched fair claim as a ratio to each. The batched runs alternate for ROUNDS
   rounds and the medians are compared (a shared machine's load swings run to run).
3. Fairness: a quiet tenant's queue wait (created -> claimed) on an idle system, then while a
   noisy tenant has 10,000 jobs queued — with the batched fair claim and with plain FIFO.

Run: ``.venv/bin/python benchmarks/queue_bench.py [--scale 1] [--rounds 3]``
(FACEGATE_BENCH_POSTGRES_URL, default postgresql://postgres@127.0.0.1:5432/test; a private
schema is made and dropped). ``--scale`` multiplies every job and sample count (``0.02``: a
quick check that every part runs; its figures are start-up noise).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg
from sqlalchemy import Engine, insert, make_url, text

from facegate.database import create_engine_from_url, migrate, utcnow
from facegate.jobs.tables import Job
from facegate.queue.claim import Claim
from facegate.queue.notify import QueueListener
from facegate.queue.postgres import PostgresClaimer
from facegate.tenancy.tables import Policy, Tenant
from queue_peers import per_second, pgqueuer_rate, procrastinate_rate

BASE_URL = os.environ.get(
    "FACEGATE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
WORKERS = 4
THROUGHPUT_JOBS = 8000  # ~8 s per run: worker start-up skew stays a small share
BATCH_JOBS = 20_000  # the batched claims and PgQueuer run ~10x faster: longer runs
ROUNDS = 3  # the batched runs alternate (facegate, PgQueuer 100, PgQueuer 10); medians
PROCRASTINATE_JOBS = 3000  # one fetch and one finish per job: the slowest by far
BATCH = 100  # jobs per claim round trip (PgQueuer's batch_size in the comparison)
# The throughput tenants' caps (8 x 64 = 512 concurrent) are checked on every claim but
# leave room for 4 workers' batches; the fairness runs' caps are the binding ones.
THROUGHPUT_TENANTS, THROUGHPUT_CAP = 8, 64
NOISY_JOBS = 10_000
JOB_SECONDS = 0.005  # fairness runs: each job "works" 5 ms
QUIET_SAMPLES = 120  # the median of a few-ms wait needs many samples to be stable (60 swung ±25 %)

_FIFO = """
UPDATE jobs SET status = 'running', attempts = jobs.attempts + 1, lease_owner = %(owner)s,
    lease_expires_at = %(expires)s, heartbeat_at = %(now)s, started_at = %(now)s,
    stage = 'claimed'
WHERE id = (SELECT id FROM jobs WHERE status = 'queued'
            ORDER BY priority DESC, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, tenant_id, attempts
"""
_FINISH = """
UPDATE jobs SET status = 'succeeded', finished_at = %(now)s, lease_owner = NULL,
    lease_expires_at = NULL
WHERE id = ANY(%(ids)s) AND lease_owner = %(owner)s AND status = 'running'
"""


def connect(url: str) -> psycopg.Connection[Any]:
    """A plain autocommit psycopg connection: the no-op job's finish (and the FIFO claim)
    cost as little client CPU as the fair claim's own lean path, so the figures compare
    the claim statements and not client-library overhead."""
    return psycopg.connect(
        make_url(url).set(drivername="postgresql").render_as_string(hide_password=False),
        autocommit=True,
    )


class FifoClaimer:
    """The baseline: oldest job first, no fairness, no caps (the usual SKIP LOCKED queue)."""

    def __init__(self, url: str) -> None:
        self.connection = connect(url)

    def claim_many(self, worker_id: str, *, limit: int, lease_seconds: float) -> list[Claim]:
        now = utcnow()
        expires = now + timedelta(seconds=lease_seconds)
        params = {"owner": worker_id, "expires": expires, "now": now}
        found = self.connection.execute(_FIFO, params, prepare=True).fetchone()
        if found is None:
            return []
        job_id, tenant_id, attempts = found
        return [Claim(job_id, tenant_id, attempts, worker_id, expires)]


def make_schema() -> tuple[str, str]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine_from_url(BASE_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    admin.dispose()
    url = BASE_URL + ("&" if "?" in BASE_URL else "?") + f"options=-csearch_path%3D{schema}"
    migrate(url)
    return schema, url


def drop_schema(schema: str) -> None:
    admin = create_engine_from_url(BASE_URL)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


def reset(engine: Engine, caps: dict[str, int]) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM jobs"))
        conn.execute(text("DELETE FROM policies"))
        conn.execute(text("DELETE FROM tenants"))
        for tenant_id, cap in caps.items():
            conn.execute(insert(Tenant).values(id=tenant_id, name=tenant_id))
            conn.execute(
                insert(Policy).values(
                    tenant_id=tenant_id, max_concurrent_jobs=cap, device_limit=cap
                )
            )


def add_jobs(engine: Engine, tenant_id: str, count: int) -> None:
    now = utcnow()
    rows: list[dict[str, Any]] = [
        {
            "id": uuid.uuid4(),
            "tenant_id": tenant_id,
            "status": "queued",
            "kind": "image",
            "spec": {},
            "inputs": [],
            "outputs": [],
            "priority": 0,
            "attempts": 0,
            "max_attempts": 3,
            "cancel_requested": False,
            "holds_device": False,
            "progress": 0.0,
            "created_at": now + timedelta(microseconds=i),
        }
        for i in range(count)
    ]
    with engine.begin() as conn:
        for start in range(0, count, 2000):
            conn.execute(insert(Job), rows[start : start + 2000])


def worker_loop(
    url: str, kind: str, batch: int, number: int, job_seconds: float, stop: Any
) -> None:
    """One worker process: claim up to ``batch`` jobs, (sleep for each), finish them in one
    statement; wait on NOTIFY when nothing is claimable."""
    # As in ``facegate worker``: no pre-ping round trip (a dropped connection fails one
    # claim, SQLAlchemy invalidates the pool, the loop goes on).
    engine = create_engine_from_url(url, pool_size=2, pool_pre_ping=False)
    finisher = connect(url)
    claimer: Any = PostgresClaimer(engine) if kind == "fair" else FifoClaimer(url)
    wake = mp.Event()  # process-local; set by the listener thread
    listener = QueueListener(engine.url, lambda _tenant: wake.set(), wait_seconds=0.2)
    listener.start()
    owner = f"bench-{number}"
    while not stop.is_set():
        claims = claimer.claim_many(owner, limit=batch, lease_seconds=60)
        if not claims:
            wake.wait(0.05)  # NOTIFY wakes us; the short timeout covers freed cap slots
            wake.clear()
            continue
        if job_seconds:
            time.sleep(job_seconds * len(claims))
        params = {"now": utcnow(), "ids": [c.job_id for c in claims], "owner": owner}
        finisher.execute(_FINISH, params, prepare=True)
    listener.stop()
    finisher.close()
    engine.dispose()


def start_workers(url: str, kind: str, batch: int, job_seconds: float) -> tuple[list[Any], Any]:
    stop = mp.Event()
    procs = [
        mp.Process(target=worker_loop, args=(url, kind, batch, n, job_seconds, stop))
        for n in range(WORKERS)
    ]
    for proc in procs:
        proc.start()
    return procs, stop


def stop_workers(procs: list[Any], stop: Any) -> None:
    stop.set()
    for proc in procs:
        proc.join(30)


def settle(engine: Engine) -> None:
    """VACUUM ANALYZE the freshly (re)filled jobs table, as a running installation's would
    be: otherwise the previous run's dead rows, and autovacuum/autoanalyze kicking in
    mid-run (with the plans changing under it), make one run differ from the next."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE jobs"))


def queued(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(text("SELECT count(*) FROM jobs WHERE status <> 'succeeded'")).scalar_one()
        )


def throughput(engine: Engine, url: str, kind: str, batch: int, jobs: int) -> float:
    tenants = {f"t{i}": THROUGHPUT_CAP for i in range(THROUGHPUT_TENANTS)}
    reset(engine, tenants)
    for tenant in tenants:
        add_jobs(engine, tenant, jobs // len(tenants))
    settle(engine)
    procs, stop = start_workers(url, kind, batch, 0.0)
    time.sleep(0.2)
    # measured from the first claim to the last finish, from the jobs' own timestamps
    while queued(engine):
        time.sleep(0.1)
    stop_workers(procs, stop)
    with engine.connect() as conn:
        first, last, done, once = conn.execute(
            text(
                "SELECT min(started_at), max(finished_at), count(*) FILTER "
                "(WHERE status = 'succeeded'), bool_and(attempts = 1) FROM jobs"
            )
        ).one()
    # The figure only counts if every job ran, and ran once (no claim was handed out twice).
    if done != jobs or not once:
        raise SystemExit(f"{kind}: {done} of {jobs} jobs succeeded, once: {once}")
    return per_second(jobs, first, last)


def quiet_waits(engine: Engine, samples: int, timeout: float = 120.0) -> list[float]:
    """Submit the quiet tenant's jobs one after another; each one's created -> started."""
    waits: list[float] = []
    for _ in range(samples):
        job_id = uuid.uuid4()
        with engine.begin() as conn:
            conn.execute(
                insert(Job).values(
                    id=job_id,
                    tenant_id="quiet",
                    status="queued",
                    kind="image",
                    spec={},
                    inputs=[],
                    outputs=[],
                    priority=0,
                    attempts=0,
                    max_attempts=3,
                    cancel_requested=False,
                    holds_device=False,
                    progress=0.0,
                    created_at=utcnow(),
                )
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                row = conn.execute(
                    text("SELECT created_at, started_at FROM jobs WHERE id = :id"), {"id": job_id}
                ).one()
            if row.started_at is not None:
                waits.append((row.started_at - row.created_at).total_seconds())
                break
            time.sleep(0.002)
        time.sleep(0.02)
    return waits


def fairness(
    engine: Engine, url: str, kind: str, noisy: int, samples: int, batch: int = 1
) -> float:
    # Noisy may hold 3 of the 4 workers; the quiet tenant's job finds the fourth.
    reset(engine, {"noisy": WORKERS - 1, "quiet": 2})
    if noisy:
        add_jobs(engine, "noisy", noisy)
    settle(engine)
    procs, stop = start_workers(url, kind, batch, JOB_SECONDS)
    time.sleep(1.0)  # workers up and busy with the noisy queue
    waits = quiet_waits(engine, samples)
    stop_workers(procs, stop)
    return statistics.median(waits) * 1000


def scaled(count: int, scale: float, multiple: int = 1) -> int:
    """``count`` times ``scale``, rounded to a multiple of ``multiple`` (at least one)."""
    return max(multiple, round(count * scale / multiple) * multiple)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="job and sample counts x this")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="alternating batched rounds")
    args = parser.parse_args()
    # The throughput runs split their jobs evenly over the tenants.
    batch_jobs = scaled(BATCH_JOBS, args.scale, THROUGHPUT_TENANTS)
    throughput_jobs = scaled(THROUGHPUT_JOBS, args.scale, THROUGHPUT_TENANTS)
    noisy_jobs = scaled(NOISY_JOBS, args.scale)
    samples = scaled(QUIET_SAMPLES, args.scale)
    schema, url = make_schema()
    engine = create_engine_from_url(url)
    try:
        rounds: dict[str, list[float]] = {"fair": [], "pgq": [], "pgq10": []}
        for _ in range(args.rounds):
            rounds["fair"].append(throughput(engine, url, "fair", BATCH, batch_jobs))
            rounds["pgq"].append(pgqueuer_rate(BASE_URL, batch_jobs, WORKERS, BATCH))
            rounds["pgq10"].append(pgqueuer_rate(BASE_URL, batch_jobs, WORKERS, 10))
        fair, pgq, pgq_default = (statistics.median(r) for r in rounds.values())
        single = throughput(engine, url, "fair", 1, throughput_jobs)
        fifo = throughput(engine, url, "fifo", 1, throughput_jobs)
        procrastinate = procrastinate_rate(
            BASE_URL, scaled(PROCRASTINATE_JOBS, args.scale), WORKERS
        )
        caps = f"{THROUGHPUT_TENANTS} tenants x cap {THROUGHPUT_CAP}"
        print(f"claims/s, {WORKERS} worker processes, no-op jobs, PostgreSQL")
        for name, values in rounds.items():
            print(f"  ({name}: {', '.join(f'{v:.0f}' for v in values)} in {args.rounds} rounds)")
        print(f"  facegate fair claim, batch {BATCH} ({caps}): {fair:8.0f} /s")
        print(f"  facegate fair claim, one at a time      : {single:8.0f} /s")
        print(f"  plain FIFO, caps off, one at a time     : {fifo:8.0f} /s")
        print(f"  pgqueuer, batch_size {BATCH}               : {pgq:8.0f} /s")
        print(f"  pgqueuer, batch_size 10 (its default)   : {pgq_default:8.0f} /s")
        print(f"  procrastinate                           : {procrastinate:8.0f} /s")
        print(f"  facegate batch / pgqueuer {BATCH}  = {fair / pgq:.2f}")
        print(f"  facegate batch / pgqueuer 10   = {fair / pgq_default:.2f}")
        print(f"  facegate batch / procrastinate = {fair / procrastinate:.2f}")
        print(f"  facegate batch / one at a time = {fair / single:.2f}")
        idle = fairness(engine, url, "fair", 0, samples, BATCH)
        busy = fairness(engine, url, "fair", noisy_jobs, samples, BATCH)
        idle_one = fairness(engine, url, "fair", 0, samples, 1)
        busy_one = fairness(engine, url, "fair", noisy_jobs, samples, 1)
        fifo_busy = fairness(engine, url, "fifo", noisy_jobs, 1)
        print(f"quiet tenant's queue wait (median), noisy tenant with {noisy_jobs} queued")
        print(f"  idle system, fair claim, batch {BATCH}: {idle:8.1f} ms")
        ratio = f"{busy / idle:.2f}x idle; target <= 1.2x"
        print(f"  noisy, fair claim, batch {BATCH}      : {busy:8.1f} ms   ({ratio})")
        print(f"  idle system, fair claim, one at a time: {idle_one:8.1f} ms")
        ratio_one = f"{busy_one / idle_one:.2f}x idle"
        print(f"  noisy, fair claim, one at a time      : {busy_one:8.1f} ms   ({ratio_one})")
        fifo_ratio = f"{fifo_busy / idle:.0f}x idle"
        print(f"  noisy, plain FIFO                     : {fifo_busy:8.1f} ms   ({fifo_ratio})")
    finally:
        engine.dispose()
        drop_schema(schema)
    return 0


if __name__ == "__main__":
    sys.exit(main())

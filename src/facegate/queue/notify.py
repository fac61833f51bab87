"""LISTEN/NOTIFY: idle workers wake as soon as a job is queued, polling is the fallback.

Migration ``0004_cluster`` makes PostgreSQL send ``NOTIFY facegate_jobs, '<tenant>'`` in
the transaction that queues a job (insert, reaper requeue, graceful hand-back), so the
notification arrives only once the job is committed and claimable. A notification can be
lost (the listener reconnecting after a database restart): the listener then wakes the
workers once after each (re)connect, and the workers' own poll covers the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import structlog
from sqlalchemy.engine import URL

CHANNEL = "facegate_jobs"
# Any notification wakes every listener; the payload names the tenant so a dedicated
# worker can ignore the other tenants' jobs. "*" means "look anyway" (after a reconnect).
ANY_TENANT = "*"

log = structlog.get_logger("facegate.queue.notify")

# In-process listeners by database URL: the embedded workers of this process, woken by a
# submission of the same process at once (the same role NOTIFY plays across processes).
_LOCAL: dict[str, Callable[[], None]] = {}


def listen_locally(database_url: str, wake: Callable[[], None]) -> Callable[[], None]:
    """Call ``wake`` when this process queues a job in ``database_url``; returns the
    function that stops it."""
    _LOCAL[database_url] = wake

    def stop() -> None:
        if _LOCAL.get(database_url) is wake:
            del _LOCAL[database_url]

    return stop


def notify_locally(database_url: str) -> None:
    """A job was queued by this process: wake its idle embedded workers now."""
    wake = _LOCAL.get(database_url)
    if wake is not None:
        wake()


def libpq_url(url: URL) -> str:
    """The SQLAlchemy URL as a plain libpq connection string (psycopg, no dialect)."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


class QueueListener:
    """A thread holding one autocommit connection that LISTENs for queued jobs."""

    def __init__(
        self,
        url: URL,
        on_queued: Callable[[str], None],
        *,
        reconnect_seconds: float = 1.0,
        wait_seconds: float = 0.5,
    ) -> None:
        self.conninfo = libpq_url(url)
        self.on_queued = on_queued
        self.reconnect_seconds = reconnect_seconds
        self.wait_seconds = wait_seconds
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="queue-listener", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except psycopg.Error as exc:
                if self.connected.is_set():
                    log.warning("listener.disconnected", error=type(exc).__name__)
                self.connected.clear()
                self._stop.wait(self.reconnect_seconds)

    def _listen(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            self.connected.set()
            log.info("listener.listening", channel=CHANNEL)
            # Jobs queued while we were not listening sent their notification to nobody.
            self.on_queued(ANY_TENANT)
            while not self._stop.is_set():
                for notification in conn.notifies(timeout=self.wait_seconds):
                    self.on_queued(notification.payload)

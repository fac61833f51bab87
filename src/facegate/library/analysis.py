"""Room for face analysis in the API process (``POST /v1/faces``, ``POST /v1/faces/library``).

That analysis runs here, outside the workers' job caps: six 40 MP faces at once slowed
another tenant's calls to over a second. :class:`AnalysisSlots` lets at most ``total``
analyses run in the process at once and ``per_tenant`` of them for one tenant; a call
beyond either is refused at once (never queued: a queued request would hold its upload and
a connection meanwhile): 429 ``quota-exceeded`` naming ``face_analysis_per_tenant`` when the
tenant holds its share, 503 naming ``face_analysis_slots`` when the process is full, both
with ``Retry-After``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from facegate.errors import QuotaExceeded, Unavailable

RETRY_AFTER_SECONDS = 2


class AnalysisSlots:
    """Process-wide slots for face analysis, with a per-tenant share."""

    def __init__(self, total: int, per_tenant: int) -> None:
        self.total = total
        self.per_tenant = min(per_tenant, total)
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def in_use(self) -> int:
        with self._lock:
            return sum(self._held.values())

    @contextmanager
    def hold(self, tenant_id: str) -> Iterator[None]:
        """A slot for ``tenant_id`` while the block runs, or the refusal at once."""
        with self._lock:
            mine = self._held.get(tenant_id, 0)
            if mine >= self.per_tenant:
                raise QuotaExceeded(
                    f"this tenant already has {mine} face analyses running (at most "
                    f"{self.per_tenant} at once); retry when one has finished",
                    limit="face_analysis_per_tenant",
                    value=self.per_tenant,
                    retry_after=RETRY_AFTER_SECONDS,
                )
            if sum(self._held.values()) >= self.total:
                raise Unavailable(
                    f"all {self.total} face analysis slots of this server are busy; retry",
                    limit="face_analysis_slots",
                    limit_value=self.total,
                    retry_after=RETRY_AFTER_SECONDS,
                )
            self._held[tenant_id] = mine + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._held[tenant_id] - 1
                if left:
                    self._held[tenant_id] = left
                else:
                    del self._held[tenant_id]

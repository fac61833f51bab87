"""The bounded ``tenant`` label.

Every distinct label value is a time series in Prometheus, kept in memory and on disk for
the retention period. An installation with thousands of tenants would multiply each
tenant-labelled metric by thousands, so the label is capped: the first ``cap`` tenants a
process sees keep their own value, later ones share ``other``. ``cap=0`` switches per-tenant
labels off (everything is ``other``); per-tenant billing numbers come from the usage
records, which have no such limit.
"""

from __future__ import annotations

import threading

OTHER = "other"
DEFAULT_TENANT_CAP = 100


class TenantLabels:
    """Maps tenant ids to label values, admitting at most ``cap`` distinct ones."""

    def __init__(self, cap: int = DEFAULT_TENANT_CAP) -> None:
        self.cap = cap
        self._admitted: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, tenant_id: str | None) -> str:
        if not tenant_id:
            return OTHER
        if tenant_id in self._admitted:  # the hot path takes no lock
            return tenant_id
        with self._lock:
            if tenant_id in self._admitted:
                return tenant_id
            if len(self._admitted) < self.cap:
                self._admitted.add(tenant_id)
                return tenant_id
        return OTHER

    def reconfigure(self, cap: int) -> None:
        with self._lock:
            self.cap = cap
            if len(self._admitted) > cap:
                self._admitted = set(sorted(self._admitted)[:cap])


tenant_label = TenantLabels()

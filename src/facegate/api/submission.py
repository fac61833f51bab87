"""The inputs of a job or batch submission as the HTTP routes receive them: the request's
options, template and saved faces resolved by :func:`resolve_inputs`, then the uploaded
source images read under the policy that resolution returned (413 past its
``max_input_bytes``), or the saved faces' prepared images in their place, and the memory
limit the jobs' estimates are held to (facegate.jobs.capacity)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import UploadFile
from sqlalchemy.orm import Session

from facegate.api.uploads import read_upload
from facegate.jobs.capacity import limit_of, live_cutoff, live_workers
from facegate.jobs.tables import WorkerRecord
from facegate.models.installed import installation_model_store
from facegate.prepared import PreparedRead
from facegate.principal import Principal
from facegate.provenance.endpoints import installation_keys
from facegate.state import AppState
from facegate.storage.tenant import TenantStore
from facegate.takedown.service import check_sources
from facegate.templates.submission import SubmissionInputs, resolve_inputs
from facegate.tenancy.policycache import STAMP, policy_cache

#: A submission's first reading: its tenant's policy stamp, beside each live worker's
#: tenants and memory budget (none: one row with NULL worker columns), on the driver.
TENANT_AND_WORKERS = PreparedRead(
    STAMP.add_columns(
        WorkerRecord.id.label("worker_id"),
        WorkerRecord.tenants.label("worker_tenants"),
        WorkerRecord.memory_budget_bytes.label("worker_budget"),
    ).outerjoin(WorkerRecord, live_workers())
)


@dataclass(frozen=True)
class RequestInputs:
    """What a submission asks for (options, policy, saved faces, template) and the bytes of
    its source images."""

    asked: SubmissionInputs
    sources: list[bytes]
    # The largest memory budget of a worker that could run the jobs (facegate.jobs.capacity).
    memory_limit: int | None = None

    def read(self, upload: UploadFile) -> bytes:
        """A further upload of the request (a target), under the same byte limit."""
        return read_upload(upload, self.asked.policy.max_input_bytes)


def request_inputs(
    session: Session,
    store: TenantStore,
    state: AppState,
    principal: Principal,
    *,
    options: str | None,
    template: str | None,
    face_ids: Sequence[uuid.UUID] | None,
    sources: Sequence[UploadFile] | None,
) -> RequestInputs:
    """Resolve the submission in ``session`` (the route's read-only transaction: nothing
    here writes, and the write transaction comes after the inputs are decoded), then read
    the uploaded ``sources``; the saved faces' images stand in for them when the request or
    its template names faces."""
    settings = state.settings
    # One statement: the stamp of the tenant's policy (facegate.tenancy.policycache: the
    # policy kept from an earlier submission stands while it is unchanged) and the live
    # workers' memory budgets (facegate.jobs.capacity), a row per worker.
    rows = TENANT_AND_WORKERS.run_in(
        session, {"tenant_id": principal.tenant_id, "cutoff": live_cutoff()}, every=True
    )
    policy = policy_cache(state.engine).policy(
        session, principal.tenant_id, rows[0] if rows else None
    )
    asked = resolve_inputs(
        session,
        store,
        installation_model_store(settings),
        principal,
        options=options,
        template=template,
        face_ids=face_ids or [],
        uploaded=bool(sources),
        policy=policy,
    )
    uploaded = [read_upload(item, asked.policy.max_input_bytes) for item in sources or []]
    library = asked.library
    chosen = library.images if library is not None else uploaded
    # Taken-down images and faces are refused as sources (451), before anything is stored.
    check_sources(
        session,
        state.face_engine,
        lambda: installation_keys(settings.provenance_path),
        principal.tenant_id,
        chosen,
    )
    workers = [(row.worker_tenants, row.worker_budget) for row in rows if row.worker_id]
    limit = limit_of(workers, principal.tenant_id, state.worker_memory_budget)
    return RequestInputs(asked, chosen, limit)

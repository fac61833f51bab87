"""Batch rules: a submission becomes one job per target, all in the caller's transaction
(each through the jobs service: the same checks, the tenant's queue cap counting every
item, so a batch over it is refused whole), idempotent like a job; cancel asks each item to
stop. A batch is submitted in the jobs service's three steps (facegate.jobs.service): its
shared sources are decoded once and every target before the write transaction opens,
which then only checks the queue cap and quota and inserts the rows."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from typing import Final

from sqlalchemy.orm import Session

from facegate.batches.repository import BatchRepository
from facegate.batches.tables import Batch, BatchItem
from facegate.database import utcnow
from facegate.errors import InvalidInput, NotFound
from facegate.jobs.policy import JobOptions
from facegate.jobs.service import (
    JobService,
    PreparedJob,
    Submission,
    Submitted,
    check_request,
    check_same_request,
    prepare_job,
    verify_sources,
)
from facegate.jobs.tables import Job
from facegate.library.schemas import JobSources
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy

MAX_BATCH_ITEMS: Final = 100


@dataclass
class BatchSubmission:
    """What the client sent; ``written`` collects the storage keys written (clean-up)."""

    tenant_id: str
    actor: str
    sources: list[bytes]
    targets: list[bytes]
    options: JobOptions  # parsed and allowed at the door: once for all the batch's jobs
    consent: str | None = None
    library: JobSources | None = None
    face_ids: list[uuid.UUID] = field(default_factory=list)
    idempotency_key: str | None = None
    written: list[str] = field(default_factory=list)

    @cached_property
    def fingerprint(self) -> str:
        """sha256 over the options, consent, saved faces named and each input's sha256."""
        digest = hashlib.sha256()
        for part in (self.options.text or "", self.consent or "", *map(str, self.face_ids)):
            digest.update(hashlib.sha256(part.encode()).digest())
        for data in (*self.sources, b"|", *self.targets):
            digest.update(hashlib.sha256(data).digest())
        return digest.hexdigest()

    def item(self, target: bytes) -> Submission:
        """The job submission of one target (the batch's sources, options and consent)."""
        return Submission(
            tenant_id=self.tenant_id,
            sources=self.sources,
            target=target,
            options=self.options,
            written=self.written,
            consent=self.consent,
            actor=self.actor,
            library=self.library,
        )

    @property
    def incoming_bytes(self) -> int:
        """Every item stores its own copy of the sources beside its target."""
        shared = sum(len(data) for data in self.sources)
        return len(self.targets) * shared + sum(len(data) for data in self.targets)


@dataclass(frozen=True)
class PreparedBatch:
    """A batch whose inputs were decoded or probed (step 2), one prepared job per target."""

    request: BatchSubmission
    jobs: list[PreparedJob]


def prepare_batch(
    request: BatchSubmission, policy: Policy, memory_limit: int | None = None
) -> PreparedBatch:
    """Step 2, in no transaction: the shared sources verified once, then each target (each
    held to ``memory_limit``, facegate.jobs.capacity)."""
    source_types = verify_sources(request.sources, policy)
    items = [request.item(target) for target in request.targets]
    return PreparedBatch(
        request,
        [prepare_job(item, policy, source_types, memory_limit=memory_limit) for item in items],
    )


@dataclass(frozen=True)
class SubmittedBatch:
    batch: Batch
    created: bool
    jobs: list[Submitted] = field(default_factory=list)


class BatchService:
    def __init__(self, session: Session, store: TenantStore) -> None:
        self.session = session
        self.store = store
        self.batches = BatchRepository(session)

    def get(self, tenant_id: str, batch_id: uuid.UUID) -> Batch:
        batch = self.batches.get(tenant_id, batch_id)
        if batch is None:
            raise NotFound("no such batch")
        return batch

    def earlier(self, tenant_id: str, key: str, fingerprint: str) -> Batch | None:
        """The batch an earlier submission with ``key`` made; 422 if it differed."""
        batch = self.batches.get_by_idempotency_key(tenant_id, key)
        if batch is not None:
            check_same_request(batch.request_sha256, fingerprint)
        return batch

    def precheck(self, request: BatchSubmission, policy: Policy) -> SubmittedBatch | None:
        """Step 1, in a read-only transaction: the earlier batch of a repeated
        Idempotency-Key, else None once the batch meets the rules and its items together
        fit the queue cap and quota (a batch over them is refused whole, unread)."""
        earlier = self._earlier_batch(request)
        if earlier is not None:
            return earlier
        if not 1 <= len(request.targets) <= MAX_BATCH_ITEMS:
            raise InvalidInput(
                f"a batch has 1 to {MAX_BATCH_ITEMS} targets, got {len(request.targets)}",
                code="invalid-batch",
                limit="max_batch_items",
                limit_value=MAX_BATCH_ITEMS,
            )
        check_request(request.item(request.targets[0]), policy)  # the same for every item
        jobs = JobService(self.session, self.store)
        jobs.check_room(request.tenant_id, policy, len(request.targets), request.incoming_bytes)
        return None

    def submit(self, prepared: PreparedBatch, policy: Policy) -> SubmittedBatch:
        """Step 3, in the caller's write transaction: the earlier batch, the queue cap and
        the quota again, then the rows of every item and of the batch."""
        request = prepared.request
        earlier = self._earlier_batch(request)
        if earlier is not None:
            return earlier
        jobs = JobService(self.session, self.store)
        jobs.check_room(request.tenant_id, policy, len(prepared.jobs), request.incoming_bytes)
        # The items' rows go in with the batch's flush: one multi-row insert per table.
        submitted = [jobs.add(one, flush=False) for one in prepared.jobs]
        key = request.idempotency_key
        batch = Batch(
            id=uuid.uuid4(),
            tenant_id=request.tenant_id,
            total=len(submitted),
            idempotency_key=key,
            request_sha256=request.fingerprint if key is not None else None,
            created_by=request.actor[:200],
            created_at=utcnow(),
        )
        items = [
            BatchItem(batch_id=batch.id, position=i, tenant_id=request.tenant_id, job_id=one.job.id)
            for i, one in enumerate(submitted)
        ]
        self.batches.add(batch, items)
        return SubmittedBatch(batch, created=True, jobs=submitted)

    def _earlier_batch(self, request: BatchSubmission) -> SubmittedBatch | None:
        key = request.idempotency_key
        if key is None:
            return None
        earlier = self.earlier(request.tenant_id, key, request.fingerprint)
        return None if earlier is None else SubmittedBatch(earlier, created=False)

    def items(self, batch: Batch) -> list[tuple[BatchItem, Job]]:
        return self.batches.items(batch.tenant_id, batch.id)

    def cancel(self, tenant_id: str, batch_id: uuid.UUID) -> Batch:
        """Cancel every item not yet ended (queued at once, running between stages)."""
        batch = self.get(tenant_id, batch_id)
        jobs = JobService(self.session, self.store)
        for _, job in self.items(batch):
            if not job.is_terminal:
                jobs.cancel(tenant_id, job.id)
        return batch

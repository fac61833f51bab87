"""Job rules: submission (policy at the door, validate before storing), cancel, lookups.

A submission goes in three steps, so that no database lock is held while media is decoded
or objects are written (one SQLite file serves every tenant's submissions and the workers):

1. :meth:`JobService.precheck`, in a read-only transaction, cheapest first: an earlier
   submission with the same Idempotency-Key, the request's rules (processors, sources,
   consent), the queue cap and the storage quota; a refused request decodes nothing;
2. outside any transaction: :func:`prepare_job` decodes every image and probes every
   video, then :func:`store_inputs` writes the input objects;
3. :meth:`JobService.submit` in the caller's write transaction: the earlier submission,
   the queue cap and the quota again (another submission may have committed since), then
   the rows only (consent, the objects' ledger, the job).

The caller deletes the written objects when step 3 does not commit or finds an earlier
submission (``Submission.written``); a process killed between steps 2 and 3 leaves objects
without a ledger row, which the hourly sweep and ``facegate storage reconcile`` remove.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from sqlalchemy.orm import Session

from facegate.consent.service import ConsentService
from facegate.database import insert_rows
from facegate.engine.image import ImageLimits, verify_image
from facegate.engine.pipeline import PipelineSpec
from facegate.errors import InvalidInput, NotFound, QuotaExceeded
from facegate.jobs.cost import TargetShape, check_memory_budget, estimate_cost
from facegate.jobs.options import validate_processors
from facegate.jobs.policy import JobOptions, check_output_resolution
from facegate.jobs.repository import JobRepository
from facegate.jobs.room import Room
from facegate.jobs.tables import Job
from facegate.jobs.video import check_video_target, input_content_type, is_video
from facegate.library.schemas import JobSources
from facegate.mediatypes import media_type
from facegate.storage.base import StorageQuotaExceeded
from facegate.storage.tenant import ObjectRef, TenantStore, check_usage
from facegate.tenancy.tables import Policy

MAX_SOURCES = 16
MAX_ATTEMPTS = 3
# A queued job of the embedded shape takes seconds; ask the client to come back soon.
QUEUE_RETRY_AFTER_SECONDS = 10


@dataclass
class Submission:
    """What the client sent, and the keys written so far (for the caller's clean-up)."""

    tenant_id: str
    sources: list[bytes]
    target: bytes
    options: JobOptions  # parsed and allowed by the plan at the door (allowed_options)
    idempotency_key: str | None = None
    written: list[str] = field(default_factory=list)
    # The ``consent`` form field (consent.schemas) and who submits it (the audit's actor).
    consent: str | None = None
    actor: str = ""
    # Sources taken from the face library (``sources`` holds their prepared images).
    library: JobSources | None = None
    # The image of the person whose faces are replaced (selector mode ``reference``).
    reference: bytes | None = None

    @property
    def inputs(self) -> list[bytes]:
        """Every input's bytes: the sources, the target, then the reference if any."""
        return [*self.sources, self.target, *([self.reference] if self.reference else [])]

    @cached_property
    def input_digests(self) -> list[bytes]:
        """sha256 of each input (:attr:`inputs`' order): hashed once per submission
        (the idempotency fingerprint and the stored inputs' audit both use them)."""
        return [hashlib.sha256(data).digest() for data in self.inputs]

    @property
    def incoming_bytes(self) -> int:
        """What storing the inputs adds to the tenant's storage."""
        return sum(len(data) for data in self.inputs)


@dataclass(frozen=True)
class Submitted:
    job: Job
    created: bool  # False: an earlier submission with the same Idempotency-Key
    # input name -> sha256 of its bytes (the audit of sensitive jobs; empty when not created)
    input_hashes: dict[str, str] = field(default_factory=dict)


def check_same_request(stored: str | None, fingerprint: str | None) -> None:
    """422 ``idempotency-key-reused`` when a repeated Idempotency-Key comes with another
    request than the one it was first used for (the IETF Idempotency-Key draft's answer)."""
    if stored is not None and fingerprint is not None and stored != fingerprint:
        raise InvalidInput(
            "this Idempotency-Key was used for a different request; "
            "use a new key for a new request",
            code="idempotency-key-reused",
        )


def request_fingerprint(request: Submission) -> str:
    """sha256 over what the client sent: the options text, the consent field and each
    input's sha256, in order (sources, then the target)."""
    digest = hashlib.sha256()
    for part in (request.options.text or "", request.consent or ""):
        digest.update(hashlib.sha256(part.encode()).digest())
    for input_digest in request.input_digests:
        digest.update(input_digest)
    return digest.hexdigest()


@dataclass(frozen=True)
class Upload:
    """One input object of a job: its name in the job's folder, bytes and content type."""

    name: str
    data: bytes
    content_type: str


@dataclass
class PreparedJob:
    """A submission whose inputs were decoded (images) or probed (videos), with the job
    row to insert; ``stored``: its input objects, once written."""

    request: Submission
    job: Job
    uploads: list[Upload]
    hashes: dict[str, str]  # input name -> sha256 (the audit of sensitive jobs)
    stored: list[ObjectRef] = field(default_factory=list)


def check_request(request: Submission, policy: Policy) -> None:
    """The rules on what a submission asks for, before any input is decoded: sound
    processors, how many sources, consent where the policy requires it."""
    spec = request.options.spec
    validate_processors(spec)
    if not 1 <= len(request.sources) <= MAX_SOURCES and "face_swapper" in spec.processors:
        raise InvalidInput(
            f"face_swapper needs 1 to {MAX_SOURCES} source images, got {len(request.sources)}",
            code="invalid-options",
        )
    if len(request.sources) > MAX_SOURCES:
        raise InvalidInput(f"at most {MAX_SOURCES} source images", code="invalid-options")
    by_reference = spec.selector.mode == "reference"
    if by_reference != (request.reference is not None):
        raise InvalidInput(
            "selector mode 'reference' needs a reference image (the form field reference), "
            "and a reference image needs selector mode 'reference'",
            code="invalid-options",
        )
    if request.library is None:
        ConsentService.check(
            request.consent, len(request.sources), policy.require_consent, spec.processors
        )
    else:
        ConsentService.check_saved(
            request.consent,
            request.library.missing_consent,
            policy.require_consent,
            spec.processors,
        )


def input_limits(policy: Policy) -> ImageLimits:
    return ImageLimits(max_bytes=policy.max_input_bytes, max_pixels=policy.max_input_pixels)


def verify_sources(sources: Sequence[bytes], policy: Policy) -> list[str]:
    """Decode each source image to prove it sound (the worker converts it when it runs);
    their content types."""
    limits = input_limits(policy)
    return [media_type(verify_image(data, limits).format) for data in sources]


def prepare_job(
    request: Submission,
    policy: Policy,
    source_types: Sequence[str] | None = None,
    *,
    memory_limit: int | None = None,
) -> PreparedJob:
    """Step 2 of a submission, in no transaction: decode or probe its inputs under the
    policy's limits. ``source_types``: the sources were verified already (a batch verifies
    its shared sources once for all its items). ``memory_limit``: the largest memory budget
    of a worker (facegate.jobs.capacity); a job estimated over it is refused (422)."""
    if source_types is None:
        source_types = verify_sources(request.sources, policy)
    spec = request.options.spec
    kind, target_type, shape = _check_target(request.target, spec, policy, input_limits(policy))
    cost = estimate_cost(spec.processors, spec.processor_options, shape, video=kind == "video")
    check_memory_budget(cost.memory_bytes, memory_limit, what="every worker's memory budget")
    uploads = [
        Upload(f"source-{i}", data, content_type)
        for i, (data, content_type) in enumerate(zip(request.sources, source_types, strict=True))
    ]
    uploads.append(Upload("target", request.target, target_type))
    if request.reference is not None:
        (reference_type,) = verify_sources([request.reference], policy)
        uploads.append(Upload("reference", request.reference, reference_type))
    hashes = {
        upload.name: digest.hex()
        for upload, digest in zip(uploads, request.input_digests, strict=True)
    }
    job = Job(
        id=uuid.uuid4(),
        tenant_id=request.tenant_id,
        status="queued",
        kind=kind,
        spec=spec.model_dump(mode="json"),
        priority=policy.priority,
        estimated_seconds=cost.seconds,
        memory_bytes=cost.memory_bytes,
        max_attempts=MAX_ATTEMPTS,
        idempotency_key=request.idempotency_key,
        request_sha256=request_fingerprint(request) if request.idempotency_key else None,
    )
    return PreparedJob(request, job, uploads, hashes)


def store_inputs(store: TenantStore, prepared: Iterable[PreparedJob]) -> None:
    """Step 2 of a submission, in no transaction: write the input objects (their ledger rows
    come with the job's, :meth:`JobService.add`); each key goes to ``request.written``
    as soon as it is written, for the caller's clean-up."""
    for one in prepared:
        for upload in one.uploads:
            ref = store.write_new(
                tenant_id=one.job.tenant_id,
                kind="inputs",
                job_id=one.job.id,
                name=upload.name,
                data=upload.data,
                content_type=upload.content_type,
            )
            one.request.written.append(ref.key)
            one.stored.append(ref)


def _check_target(
    data: bytes, spec: PipelineSpec, policy: Policy, limits: ImageLimits
) -> tuple[str, str, TargetShape]:
    """(job kind, content type, size) of a target that passed the policy; a video is told
    apart by its bytes and probed under the tenant's video limits."""
    if is_video(data):
        info = check_video_target(data, spec, policy)
        shape = TargetShape(info.width, info.height, info.frames)
        return "video", input_content_type(info), shape
    target = verify_image(data, limits)
    check_output_resolution(spec, policy, target.width, target.height)
    return "image", media_type(target.format), TargetShape(target.width, target.height)


class JobService:
    """Rules on jobs of one tenant, inside the caller's transaction."""

    def __init__(self, session: Session, tenant_store: TenantStore) -> None:
        self.session = session
        self.jobs = JobRepository(session)
        self.tenant_store = tenant_store
        self.last_room: Room | None = None  # the last reading of check_room

    def earlier(self, tenant_id: str, key: str, fingerprint: str | None) -> Job | None:
        """The job an earlier submission with ``key`` made, if any; 422 when that
        submission's content differs (the IETF Idempotency-Key draft's answer to a key
        reused for another request)."""
        job = self.jobs.get_by_idempotency_key(tenant_id, key)
        if job is not None:
            check_same_request(job.request_sha256, fingerprint)
        return job

    def get(self, tenant_id: str, job_id: uuid.UUID) -> Job:
        job = self.jobs.get(tenant_id, job_id)
        if job is None:
            raise NotFound("no such job")
        return job

    def cancel(self, tenant_id: str, job_id: uuid.UUID) -> Job:
        job = self.jobs.request_cancel(tenant_id, job_id)
        if job is None:
            raise NotFound("no such job")
        return job

    def check_room(self, tenant_id: str, policy: Policy, jobs: int, incoming_bytes: int) -> None:
        """Refuse ``jobs`` more queued jobs past the tenant's queue cap (429) and
        ``incoming_bytes`` more past its storage quota (507): one read of each for a whole
        submission (a batch's items together)."""
        cap, quota = policy.max_queued_jobs, policy.storage_quota_bytes
        queued, used = self.jobs.room(tenant_id, at_most=cap, usage=quota is not None)
        self.last_room = Room(queued, used)
        if queued + jobs > cap:
            more = f"; {jobs} more would pass it" if jobs > 1 else ""
            raise QuotaExceeded(
                f"this tenant already has {queued} queued jobs (max_queued_jobs {cap}){more}",
                limit="max_queued_jobs",
                value=cap,
                retry_after=QUEUE_RETRY_AFTER_SECONDS,
            )
        # The inputs are then recorded without a quota check each (their keys are new,
        # nothing is replaced, and the same transaction holds both).
        try:
            check_usage(used or 0, incoming_bytes, quota)
        except StorageQuotaExceeded as exc:
            raise exc.problem() from None

    def precheck(
        self, request: Submission, policy: Policy, *, read_room: bool = True
    ) -> Submitted | None:
        """Step 1, in a read-only transaction: the earlier submission of a repeated
        Idempotency-Key, else None once the request meets the rules and would fit the
        queue cap and quota (refusals as :meth:`submit`'s). ``read_room=False``: the
        caller saw the tenant far from both moments ago (``facegate.jobs.room``)."""
        earlier = self._earlier_submission(request)
        if earlier is not None:
            return earlier
        check_request(request, policy)
        if read_room:
            self.check_room(request.tenant_id, policy, 1, request.incoming_bytes)
        return None

    def submit(self, prepared: PreparedJob, policy: Policy) -> Submitted:
        """Step 3, in the caller's write transaction: the earlier submission, the queue
        cap and the quota again (another submission may have committed since step 1),
        then the rows."""
        request = prepared.request
        earlier = self._earlier_submission(request)
        if earlier is not None:
            return earlier
        self.check_room(request.tenant_id, policy, 1, request.incoming_bytes)
        return self.add(prepared)

    def _earlier_submission(self, request: Submission) -> Submitted | None:
        key = request.idempotency_key
        if key is None:
            return None
        earlier = self.earlier(request.tenant_id, key, request_fingerprint(request))
        return None if earlier is None else Submitted(earlier, created=False)

    def add(self, prepared: PreparedJob, *, flush: bool = True) -> Submitted:
        """Insert the rows of a job whose inputs are stored: its consent attestations, the
        inputs' ledger rows and the job (no check: the caller made them), the job's and
        the ledger's by Core (the job is not in the session afterwards); ``flush=False``
        leaves the inserts to the caller's next flush, through the session (a batch's items
        in one)."""
        request, job = prepared.request, prepared.job
        attested = (
            request.library.consent
            if request.library is not None
            else ConsentService(self.session).record(
                request.tenant_id,
                request.actor,
                request.consent,
                ConsentService.attested(list(prepared.hashes.items())),
            )
        )
        job.consent = [ref.model_dump(mode="json") for ref in attested] or None
        job.inputs = list(prepared.hashes)
        if flush:
            # The job's row and its inputs' ledger rows as two Core INSERTs (the unit of
            # work's flush of the same rows costs ~3x the CPU); the job stays transient.
            insert_rows(self.session, [job, *TenantStore.ledger_rows(prepared.stored)])
        else:
            self.tenant_store.record(self.session, prepared.stored, flush=False)
            self.jobs.add(job, flush=False)
        return Submitted(job, created=True, input_hashes=prepared.hashes)

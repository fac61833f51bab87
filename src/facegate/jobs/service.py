"""Job rules: submission (policy at the door, validate before storing), cancel, lookups.

Nothing is stored until every check has passed; the inputs and the job row are written in
the caller's transaction, and the caller deletes the written objects if that transaction
does not commit (``Submission.written``), so a refused request leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from functools import cached_property

from sqlalchemy.orm import Session

from facegate.consent.service import ConsentService
from facegate.engine.image import ImageLimits, verify_image
from facegate.engine.pipeline import PipelineSpec
from facegate.errors import InvalidInput, NotFound, QuotaExceeded
from facegate.jobs.options import validate_processors
from facegate.jobs.policy import JobOptions, check_output_resolution
from facegate.jobs.repository import JobRepository
from facegate.jobs.tables import Job
from facegate.jobs.video import check_video_target, input_content_type, is_video
from facegate.library.schemas import JobSources
from facegate.mediatypes import media_type
from facegate.storage.base import StorageQuotaExceeded
from facegate.storage.tenant import TenantStore
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

    @cached_property
    def input_digests(self) -> list[bytes]:
        """sha256 of each input, sources then the target: hashed once per submission
        (the idempotency fingerprint and the stored inputs' audit both use them)."""
        return [hashlib.sha256(data).digest() for data in [*self.sources, self.target]]


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


class JobService:
    """Rules on jobs of one tenant, inside the caller's transaction."""

    def __init__(self, session: Session, tenant_store: TenantStore) -> None:
        self.session = session
        self.jobs = JobRepository(session)
        self.tenant_store = tenant_store

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

    def submit(self, request: Submission, policy: Policy) -> Submitted:
        tenant_id = request.tenant_id
        fingerprint = request_fingerprint(request) if request.idempotency_key else None
        if request.idempotency_key is not None:
            earlier = self.earlier(tenant_id, request.idempotency_key, fingerprint)
            if earlier is not None:
                return Submitted(earlier, created=False)

        # 1. everything that needs no storage, cheapest first
        spec = request.options.spec
        validate_processors(spec)
        if not 1 <= len(request.sources) <= MAX_SOURCES and "face_swapper" in spec.processors:
            raise InvalidInput(
                f"face_swapper needs 1 to {MAX_SOURCES} source images, got {len(request.sources)}",
                code="invalid-options",
            )
        if len(request.sources) > MAX_SOURCES:
            raise InvalidInput(f"at most {MAX_SOURCES} source images", code="invalid-options")
        consent = ConsentService(self.session)
        if request.library is None:
            consent.check(
                request.consent, len(request.sources), policy.require_consent, spec.processors
            )
        else:
            consent.check_saved(
                request.consent,
                request.library.missing_consent,
                policy.require_consent,
                spec.processors,
            )
        limits = ImageLimits(max_bytes=policy.max_input_bytes, max_pixels=policy.max_input_pixels)
        # Decoded to prove they are sound, not converted: the worker does that when it runs.
        sources = [verify_image(data, limits) for data in request.sources]
        kind, target_type = self._check_target(request.target, spec, policy, limits)
        queued = self.jobs.count_in_status(tenant_id, ("queued",), at_most=policy.max_queued_jobs)
        if queued >= policy.max_queued_jobs:
            raise QuotaExceeded(
                f"this tenant already has {queued} queued jobs (max_queued_jobs "
                f"{policy.max_queued_jobs})",
                limit="max_queued_jobs",
                value=policy.max_queued_jobs,
                retry_after=QUEUE_RETRY_AFTER_SECONDS,
            )
        # One read of the tenant's usage for all inputs together: the inputs below are
        # then stored without a quota check each (their keys are new, nothing is replaced,
        # and the same transaction holds both).
        incoming = len(request.target) + sum(len(data) for data in request.sources)
        try:
            self.tenant_store.check_quota(
                self.session, tenant_id, incoming, policy.storage_quota_bytes
            )
        except StorageQuotaExceeded as exc:
            raise exc.problem() from None

        # 2. store the inputs and queue the job (same transaction)
        job = Job(
            id=uuid.uuid4(),
            tenant_id=tenant_id,
            status="queued",
            kind=kind,
            spec=spec.model_dump(mode="json"),
            priority=policy.priority,
            max_attempts=MAX_ATTEMPTS,
            idempotency_key=request.idempotency_key,
            request_sha256=fingerprint,
        )
        uploads = [
            (f"source-{i}", data, media_type(img.format))
            for i, (data, img) in enumerate(zip(request.sources, sources, strict=True))
        ]
        uploads.append(("target", request.target, target_type))
        hashes = {
            name: digest.hex()
            for (name, _, _), digest in zip(uploads, request.input_digests, strict=True)
        }
        attested = (
            request.library.consent
            if request.library is not None
            else consent.record(
                tenant_id, request.actor, request.consent, consent.attested(list(hashes.items()))
            )
        )
        job.consent = [ref.model_dump(mode="json") for ref in attested] or None
        for name, data, content_type in uploads:
            self._store_input(request, job.id, name, data, content_type)
        job.inputs = list(hashes)
        self.jobs.add(job)
        return Submitted(job, created=True, input_hashes=hashes)

    @staticmethod
    def _check_target(
        data: bytes, spec: PipelineSpec, policy: Policy, limits: ImageLimits
    ) -> tuple[str, str]:
        """(job kind, content type) of a target that passed the policy; a video is told
        apart by its bytes and probed under the tenant's video limits."""
        if is_video(data):
            return "video", input_content_type(check_video_target(data, spec, policy))
        target = verify_image(data, limits)
        check_output_resolution(spec, policy, target.width, target.height)
        return "image", media_type(target.format)

    def _store_input(
        self,
        request: Submission,
        job_id: uuid.UUID,
        name: str,
        data: bytes,
        content_type: str,
    ) -> None:
        ref = self.tenant_store.put(
            self.session,
            tenant_id=request.tenant_id,
            kind="inputs",
            job_id=job_id,
            name=name,
            data=data,
            content_type=content_type,
            new=True,
        )
        request.written.append(ref.key)

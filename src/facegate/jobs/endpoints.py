"""HTTP routes of jobs: submit, read, list, cancel, result bytes, progress events, and what
the calling tenant may use. Routes parse, authorise, call the service, and return."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Header, Query, Request, Response, UploadFile
from fastapi.responses import RedirectResponse, StreamingResponse
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from facegate.api.deps import SessionDep, get_state, run_in_session, run_on_connection, scoped
from facegate.api.errors import PROBLEM_RESPONSES, UPLOAD_PROBLEM_RESPONSES, problem_openapi
from facegate.api.submission import request_inputs
from facegate.database import session_scope
from facegate.engine.errors import ContentPolicyViolation, WeakSwap
from facegate.errors import Conflict, InvalidInput, NotFound
from facegate.jobs.events import job_events
from facegate.jobs.observe import audit_submission, observe_submitted
from facegate.jobs.repository import JOB_VIEW_READ, JobRepository
from facegate.jobs.room import Room, room_seen
from facegate.jobs.runtime import tenant_store_for, write_sessions
from facegate.jobs.schemas import (
    JobOut,
    JobPage,
    decode_cursor,
    encode_cursor,
)
from facegate.jobs.service import (
    JobService,
    Submission,
    Submitted,
    prepare_job,
    request_fingerprint,
    store_inputs,
)
from facegate.principal import Principal
from facegate.queue.notify import notify_locally
from facegate.takedown.service import job_missing
from facegate.templates.service import TemplateService

router = APIRouter(prefix="/v1", tags=["jobs"], responses=PROBLEM_RESPONSES)

ReadPrincipal = Annotated[Principal, scoped("jobs:read")]
WritePrincipal = Annotated[Principal, scoped("jobs:write")]
JobStatusName = Literal["queued", "running", "succeeded", "failed", "cancelled"]

_RESULT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The result's bytes",
        "content": {
            "image/jpeg": {},
            "image/png": {},
            "image/webp": {},
            "video/mp4": {},
            "video/webm": {},
        },
    },
    307: {"description": "S3 storage: fetch the result from this presigned URL (Location)"},
    409: problem_openapi("The job has no result (not succeeded)"),
    422: problem_openapi("Content moderation refused the job (content-policy-violation)"),
}
_SUBMIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    **UPLOAD_PROBLEM_RESPONSES,
    200: {"description": "An earlier submission with the same Idempotency-Key", "model": JobOut},
    409: problem_openapi("A processor or model the job asks for is not installed"),
    503: problem_openapi("A model the job needs is unavailable"),
}


@router.post("/jobs", status_code=202, response_model=JobOut, responses=_SUBMIT_RESPONSES)
def submit_job(
    request: Request,
    principal: WritePrincipal,
    target: Annotated[
        UploadFile,
        File(description="The image or video (told apart by content) whose faces are replaced"),
    ],
    source: Annotated[
        list[UploadFile] | None,
        File(description="Source image(s) giving the identity; repeat the field for more"),
    ] = None,
    options: Annotated[
        str | None,
        Form(
            description="JSON: processors, processor_options, selector, output (or the "
            "shortcuts mapping, blend, mask, model, format, quality)"
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255)
    ] = None,
    consent: Annotated[
        str | None,
        Form(
            description="JSON: the consent attestation of each source image, in order (or one "
            'object for all): {"attested_by", "statement_version", "attested_at"}; required '
            "for a sensitive processor when the tenant's policy has require_consent"
        ),
    ] = None,
    source_face_id: Annotated[
        list[uuid.UUID] | None,
        Form(
            description="Saved faces of the library (POST /v1/faces/library) as the sources, "
            "instead of uploading them; repeat the field for more. Needs faces:read; their "
            "consent records come with them"
        ),
    ] = None,
    reference: Annotated[
        UploadFile | None,
        File(
            description="With selector mode 'reference': an image of the person whose faces "
            "are replaced (face reference_face_index of it); only faces of that person change"
        ),
    ] = None,
    template: Annotated[
        str | None,
        Form(
            max_length=200,
            description="A job template (POST /v1/templates) by id or name: its options, and "
            "its saved faces as the sources when it names some (then send no options, and no "
            "source or source_face_id when it names faces). Needs templates:read",
        ),
    ] = None,
) -> Response:
    """Queue a swap. Everything is validated before anything is stored; ``202`` with a
    ``Location`` header, or ``200`` with the original job for a repeated Idempotency-Key."""
    state = get_state(request)
    store = tenant_store_for(state.settings)
    seen = room_seen(state.engine)
    written: list[str] = []
    # The jobs service's three steps (facegate.jobs.service): the checks that read the
    # database in a read-only transaction; the decoding, probing and object writes in none;
    # then a short write transaction (on SQLite it holds the write lock from BEGIN: the
    # queue-cap and quota checks see no concurrent writer) that only checks and inserts.
    try:
        with session_scope(state.session_factory, read_only=True) as read:
            given = request_inputs(
                read,
                store,
                state,
                principal,
                options=options,
                template=template,
                face_ids=source_face_id,
                sources=source,
            )
            asked = given.asked
            submission = Submission(
                tenant_id=principal.tenant_id,
                sources=given.sources,
                target=given.read(target),
                options=asked.options,
                idempotency_key=idempotency_key,
                written=written,
                consent=consent,
                actor=principal.actor,
                library=asked.library,
                reference=None if reference is None else given.read(reference),
            )
            far = seen.far_from_limits(principal.tenant_id, asked.policy, submission.incoming_bytes)
            submitted = JobService(read, store).precheck(
                submission, asked.policy, read_room=not far
            )
        if submitted is None:
            prepared = prepare_job(submission, asked.policy, memory_limit=given.memory_limit)
            store_inputs(store, [prepared])
            with session_scope(write_sessions(state)) as write:
                service = JobService(write, store)
                submitted = service.submit(prepared, asked.policy)
                if submitted.created:
                    audit_submission(write, principal, submitted.job, submitted.input_hashes)
                    if asked.template is not None:
                        TemplateService(write).audit_use(
                            principal, asked.template, f"job:{submitted.job.id}"
                        )
            if not submitted.created:  # an earlier submission committed meanwhile
                store.delete_keys(written)
            elif service.last_room is not None:  # committed: what it saw, plus itself
                last = service.last_room
                used = None if last.used is None else last.used + submission.incoming_bytes
                seen.record(principal.tenant_id, Room(last.queued + 1, used))
    except IntegrityError:
        # Two submissions with one Idempotency-Key raced (PostgreSQL): the other won.
        store.delete_keys(written)
        with session_scope(state.session_factory, read_only=True) as read:
            service = JobService(read, store)
            submitted = _earlier_submission(service, submission, principal.tenant_id)
    except BaseException:
        store.delete_keys(written)
        seen.forget(principal.tenant_id)  # a refusal: the next request reads again
        raise
    if submitted.created:
        notify_locally(state.settings.database_url)
        observe_submitted(submitted.job)
    # Serialised once, here: returned as a model, FastAPI would validate it again first, in
    # a second worker-thread hop (a sync route's return value is validated in the pool).
    return Response(
        JobOut.of(submitted.job).model_dump_json(by_alias=True),
        status_code=202 if submitted.created else 200,
        media_type="application/json",
        headers={"Location": f"/v1/jobs/{submitted.job.id}"},
    )


def _earlier_submission(service: JobService, submission: Submission, tenant_id: str) -> Submitted:
    key = submission.idempotency_key
    job = service.earlier(tenant_id, key, request_fingerprint(submission)) if key else None
    if job is None:
        raise Conflict("the submission conflicted with another; retry it")
    return Submitted(job, created=False)


# The two polling routes are async: the list does its reads in one worker-thread hop
# (run_in_session); the job's own, the hottest, is a prepared read (facegate.prepared: on
# SQLite on the event loop, no hop). They are the most frequent calls.
@router.get("/jobs", response_model=JobPage)
async def list_jobs(
    request: Request,
    principal: ReadPrincipal,
    status: Annotated[list[JobStatusName] | None, Query(description="Filter; repeatable")] = None,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> JobPage:
    """The tenant's jobs, newest first, a page at a time."""
    after = decode_cursor(cursor) if cursor else None

    def read(session: Session) -> JobPage:
        jobs = JobRepository(session).list_page(
            principal.tenant_id, statuses=status or (), after=after, limit=limit + 1
        )
        page, more = jobs[:limit], len(jobs) > limit
        return JobPage(
            items=[JobOut.of(job) for job in page],
            next_cursor=encode_cursor(page[-1]) if more and page else None,
        )

    return await run_in_session(request, read, read_only=True)


@router.get("/jobs/{job_id}", response_model=JobOut)
async def get_job(job_id: uuid.UUID, request: Request, principal: ReadPrincipal) -> Response:
    """One job: its status, progress, error or result summary (the polling route)."""
    tenant_id = principal.tenant_id

    def read(connection: Connection) -> Any:
        return JobRepository.job_row(connection, tenant_id, job_id)

    params = {"tenant_id": tenant_id, "job_id": job_id}
    row = await get_state(request).reads.first(JOB_VIEW_READ, params, read)
    if row is None:  # another tenant's, removed, or never there: 404 or 410, as elsewhere

        def missing(connection: Connection) -> Any:
            return read(connection) or job_missing(connection, tenant_id, job_id)

        found = await run_on_connection(request, missing)
        if isinstance(found, Exception):
            raise found
        row = found
    # Serialised once, here: returned as a model, FastAPI would validate it a second time.
    job = JobOut.of(row)
    return Response(job.model_dump_json(by_alias=True), media_type="application/json")


@router.delete("/jobs/{job_id}", responses={409: problem_openapi("Already finished")})
def cancel_job(
    job_id: uuid.UUID, request: Request, session: SessionDep, principal: WritePrincipal
) -> JobOut:
    """Cancel: a queued job at once, a running one between two stages. A finished job is
    returned unchanged."""
    state = get_state(request)
    # End the request's transaction (authentication may have written to it) before the
    # write transaction below asks for SQLite's write lock.
    session.commit()
    with session_scope(write_sessions(state)) as write:
        try:
            job = JobService(write, tenant_store_for(state.settings)).cancel(
                principal.tenant_id, job_id
            )
        except NotFound:
            raise job_missing(write, principal.tenant_id, job_id) from None
        return JobOut.of(job)


@router.get("/jobs/{job_id}/result", response_class=Response, responses=_RESULT_RESPONSES)
def get_result(
    job_id: uuid.UUID, request: Request, session: SessionDep, principal: ReadPrincipal
) -> Response:
    """The output bytes of a succeeded job, with its content type; on S3 storage a 307
    redirect to a short-lived presigned URL of the object instead."""
    store = tenant_store_for(get_state(request).settings)
    try:
        job = JobService(session, store).get(principal.tenant_id, job_id)
    except NotFound:
        raise job_missing(session, principal.tenant_id, job_id) from None
    if job.error_type in (ContentPolicyViolation.code, WeakSwap.code):
        # Refused by content moderation, or a swap the tenant's policy fails (naming the
        # face and its figures): say so in that problem's own terms.
        raise InvalidInput(job.error_detail or "refused", code=job.error_type)
    if job.status != "succeeded" or not job.outputs:
        raise Conflict(f"the job is {job.status}; it has no result", job_status=job.status)
    ref = store.find(session, principal.tenant_id, "outputs", job.id, job.outputs[0])
    if ref is None:
        raise NotFound("the result is no longer stored (past the tenant's retention)")
    extension = ref.name.rsplit(".", 1)[-1]
    filename = f"{job.id}.{extension}"
    url = store.download_url(principal.tenant_id, "outputs", job.id, ref.name, filename=filename)
    if url is not None:
        # S3: the client fetches the bytes from the bucket with a short-lived signed URL.
        return RedirectResponse(url, status_code=307)
    return StreamingResponse(
        store.iter_chunks(principal.tenant_id, "outputs", job.id, ref.name),
        media_type=ref.content_type,
        headers={
            "Content-Length": str(ref.size_bytes),
            "Content-Disposition": f'attachment; filename="{filename}"',
        },
    )


@router.get(
    "/jobs/{job_id}/events",
    response_class=StreamingResponse,
    responses={200: {"description": "Server-Sent Events", "content": {"text/event-stream": {}}}},
)
def stream_events(
    job_id: uuid.UUID, request: Request, session: SessionDep, principal: ReadPrincipal
) -> Response:
    """``status`` events (progress, stage, status) until the job is terminal, then ``end``."""
    state = get_state(request)
    if JobRepository(session).get(principal.tenant_id, job_id) is None:
        raise job_missing(session, principal.tenant_id, job_id)
    return StreamingResponse(
        job_events(state.session_factory, principal.tenant_id, job_id),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )

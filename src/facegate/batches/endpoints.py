"""HTTP routes of batches: submit one source (or saved faces) × many targets, read the
progress and each item's outcome, cancel, and download the results as a streamed ZIP."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Header, Query, Request, Response, UploadFile
from fastapi.responses import StreamingResponse
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from facegate.api.bodyguard import body_budget
from facegate.api.deps import SessionDep, get_state, run_in_session, scoped
from facegate.api.errors import PROBLEM_RESPONSES, UPLOAD_PROBLEM_RESPONSES, problem_openapi
from facegate.api.submission import request_inputs
from facegate.batches.archive import ArchiveEntry, archive_chunks
from facegate.batches.repository import BatchRepository
from facegate.batches.schemas import BatchOut, BatchSummary
from facegate.batches.service import (
    MAX_BATCH_ITEMS,
    BatchService,
    BatchSubmission,
    SubmittedBatch,
    prepare_batch,
)
from facegate.database import session_scope
from facegate.errors import Conflict
from facegate.jobs.observe import audit_submission, observe_submitted
from facegate.jobs.runtime import tenant_store_for, write_sessions
from facegate.jobs.service import store_inputs
from facegate.observability.audit import record_audit
from facegate.principal import Principal
from facegate.queue.notify import notify_locally
from facegate.templates.service import TemplateService, TemplateUse

router = APIRouter(prefix="/v1/batches", tags=["batches"], responses=PROBLEM_RESPONSES)

ReadPrincipal = Annotated[Principal, scoped("jobs:read")]
WritePrincipal = Annotated[Principal, scoped("jobs:write")]
BATCH_SUBMIT = "batch.submit"

_SUBMIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    **UPLOAD_PROBLEM_RESPONSES,
    200: {"description": "An earlier submission with the same Idempotency-Key"},
    409: problem_openapi("A processor or model the batch asks for is not installed"),
}


@router.post("", status_code=202, responses=_SUBMIT_RESPONSES)
@body_budget("max_batch_body_bytes")
def submit_batch(
    request: Request,
    response: Response,
    principal: WritePrincipal,
    target: Annotated[
        list[UploadFile],
        File(description=f"The targets (images or videos), 1 to {MAX_BATCH_ITEMS}; repeat"),
    ],
    source: Annotated[
        list[UploadFile] | None, File(description="Source image(s) for every target")
    ] = None,
    source_face_id: Annotated[
        list[uuid.UUID] | None,
        Form(description="Saved faces of the library as the sources (needs faces:read)"),
    ] = None,
    options: Annotated[str | None, Form(description="JSON options, as for a job")] = None,
    consent: Annotated[str | None, Form(description="As for a job (uploaded sources)")] = None,
    template: Annotated[
        str | None,
        Form(
            max_length=200,
            description="A job template by id or name, as for a job: its options and faces",
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255)
    ] = None,
) -> BatchOut:
    """Queue one job per target, all or none (the tenant's queue cap counts every item);
    ``202``, or ``200`` with the earlier batch for a repeated Idempotency-Key."""
    state = get_state(request)
    store = tenant_store_for(state.settings)
    written: list[str] = []
    # As a job's submission (facegate.jobs.service): nothing is decoded or written while
    # the write transaction (SQLite's write lock) is open, which only checks and inserts.
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
            submission = BatchSubmission(
                tenant_id=principal.tenant_id,
                actor=principal.actor,
                sources=given.sources,
                targets=[given.read(item) for item in target],
                options=asked.options,
                consent=consent,
                library=asked.library,
                face_ids=asked.face_ids,
                idempotency_key=idempotency_key,
                written=written,
            )
            submitted = BatchService(read, store).precheck(submission, asked.policy)
        if submitted is None:
            prepared = prepare_batch(submission, asked.policy, given.memory_limit)
            store_inputs(store, prepared.jobs)
            with session_scope(write_sessions(state)) as write:
                submitted = BatchService(write, store).submit(prepared, asked.policy)
                if submitted.created:
                    audit_batch(write, principal, submitted, asked.template)
            if not submitted.created:  # an earlier submission committed meanwhile
                store.delete_keys(written)
        batch_id = submitted.batch.id
    except IntegrityError:
        # Two submissions with one Idempotency-Key raced (PostgreSQL): the other won.
        store.delete_keys(written)
        with session_scope(state.session_factory, read_only=True) as read:
            earlier = (
                BatchService(read, store).earlier(
                    principal.tenant_id, idempotency_key, submission.fingerprint
                )
                if idempotency_key
                else None
            )
        if earlier is None:
            raise Conflict("the submission conflicted with another; retry it") from None
        submitted_created, batch_id = False, earlier.id
    except BaseException:
        store.delete_keys(written)
        raise
    else:
        submitted_created = submitted.created
        if submitted_created:
            notify_locally(state.settings.database_url)
            for item in submitted.jobs:
                observe_submitted(item.job)
    response.headers["Location"] = f"/v1/batches/{batch_id}"
    if not submitted_created:
        response.status_code = 200
    with session_scope(state.session_factory, read_only=True) as read:
        service = BatchService(read, store)
        batch = service.get(principal.tenant_id, batch_id)
        return BatchOut.of(batch, service.items(batch))


def audit_batch(
    session: Session, principal: Principal, submitted: SubmittedBatch, template: TemplateUse | None
) -> None:
    """The audit events of a new batch, in its transaction: each item's (a job's), the
    batch's, and the template's use."""
    for item in submitted.jobs:
        audit_submission(session, principal, item.job, item.input_hashes)
    target = f"batch:{submitted.batch.id}"
    record_audit(session, principal, BATCH_SUBMIT, target, {"items": submitted.batch.total})
    if template is not None:
        TemplateService(session).audit_use(principal, template, target)


@router.get("")
async def list_batches(
    request: Request,
    principal: ReadPrincipal,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[BatchSummary]:
    """The tenant's batches, newest first."""

    def read(session: Session) -> list[BatchSummary]:
        rows = BatchRepository(session).page(principal.tenant_id, limit)
        return [
            BatchSummary(id=b.id, total=b.total, created_by=b.created_by, created_at=b.created_at)
            for b in rows
        ]

    return await run_in_session(request, read, read_only=True)


@router.get("/{batch_id}")
async def get_batch(batch_id: uuid.UUID, request: Request, principal: ReadPrincipal) -> BatchOut:
    """Progress across the items and each item's status, error or result."""
    store = tenant_store_for(get_state(request).settings)

    def read(session: Session) -> BatchOut:
        service = BatchService(session, store)
        batch = service.get(principal.tenant_id, batch_id)
        return BatchOut.of(batch, service.items(batch))

    return await run_in_session(request, read, read_only=True)


@router.delete("/{batch_id}")
def cancel_batch(
    batch_id: uuid.UUID, request: Request, session: SessionDep, principal: WritePrincipal
) -> BatchOut:
    """Cancel every item not yet ended: queued ones at once, running ones between stages."""
    state = get_state(request)
    store = tenant_store_for(state.settings)
    session.commit()  # authentication may have written; the write transaction follows
    with session_scope(write_sessions(state)) as write:
        service = BatchService(write, store)
        batch = service.cancel(principal.tenant_id, batch_id)
        return BatchOut.of(batch, service.items(batch))


@router.get(
    "/{batch_id}/archive",
    response_class=StreamingResponse,
    responses={200: {"description": "ZIP of the results", "content": {"application/zip": {}}}},
)
def download_archive(
    batch_id: uuid.UUID, request: Request, session: SessionDep, principal: ReadPrincipal
) -> Response:
    """The results of the items that succeeded so far, as one ZIP streamed as it is
    written (``<position>-<job id>.<ext>``); 409 while none has."""
    store = tenant_store_for(get_state(request).settings)
    service = BatchService(session, store)
    batch = service.get(principal.tenant_id, batch_id)
    entries = []
    for item, job in service.items(batch):
        if job.status != "succeeded" or not job.outputs:
            continue
        ref = store.find(session, principal.tenant_id, "outputs", job.id, job.outputs[0])
        if ref is None:  # past the tenant's retention
            continue
        extension = ref.name.rsplit(".", 1)[-1]
        entries.append(ArchiveEntry(f"{item.position:03d}-{job.id}.{extension}", job.id, ref.name))
    if not entries:
        raise Conflict("no item of this batch has a result yet")
    return StreamingResponse(
        archive_chunks(store, principal.tenant_id, entries),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="batch-{batch.id}.zip"'},
    )

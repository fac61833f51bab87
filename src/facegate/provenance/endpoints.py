"""HTTP routes of provenance: ``POST /v1/verify`` (public: anyone may ask whether this
installation made a file; unauthenticated callers are rate-limited per IP by the gateway),
``POST /v1/reports`` (public: report a suspected deepfake to the installation) and
``GET /v1/jobs/{id}/manifest`` (the C2PA sidecar of a WebM result)."""

from __future__ import annotations

import uuid
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, Request, Response, UploadFile

from facegate.api.bodyguard import body_budget
from facegate.api.deps import SessionDep, get_principal, get_state, scoped
from facegate.api.errors import PROBLEM_RESPONSES, UPLOAD_PROBLEM_RESPONSES
from facegate.api.gateway import has_credentials
from facegate.api.uploads import read_upload
from facegate.errors import NotFound
from facegate.jobs.runtime import tenant_store_for
from facegate.jobs.service import JobService
from facegate.principal import Principal
from facegate.provenance.keys import InstallationKeys, load_keys
from facegate.provenance.marker import SIDECAR_NAME
from facegate.provenance.reports import ReportLimits, report_file
from facegate.provenance.schemas import ReportIn, ReportOut, VerifyOut
from facegate.provenance.verify import verify_file

router = APIRouter(prefix="/v1", tags=["provenance"], responses=PROBLEM_RESPONSES)
SIDECAR_MAX_BYTES = 1024 * 1024


@lru_cache(maxsize=4)
def installation_keys(directory: Path) -> InstallationKeys:
    """Loaded once per process (a failure is not cached: keys mounted later are found)."""
    return load_keys(directory)


async def optional_principal(request: Request) -> Principal | None:
    """The caller when it sent credentials (then they must be valid), else None."""
    if not has_credentials(request.scope):
        return None
    return await get_principal(request)


@router.post("/verify", responses=UPLOAD_PROBLEM_RESPONSES)
@body_budget("verify_max_bytes")
def verify(
    request: Request,
    session: SessionDep,
    principal: Annotated[Principal | None, Depends(optional_principal)],
    file: Annotated[UploadFile, File(description="The image or video to check")],
    manifest: Annotated[
        UploadFile | None,
        File(description="A WebM result's C2PA sidecar (GET /v1/jobs/{id}/manifest)"),
    ] = None,
) -> VerifyOut:
    """Whether this installation made the file (C2PA manifest and watermark); when, and the
    job and tenant, only to that tenant's keys and admins. The upload is not stored."""
    settings = get_state(request).settings
    keys = installation_keys(settings.provenance_path)
    data = read_upload(file, settings.verify_max_bytes)
    sidecar = read_upload(manifest, SIDECAR_MAX_BYTES) if manifest is not None else None
    return verify_file(
        session, keys, data, principal, max_bytes=settings.verify_max_bytes, sidecar=sidecar
    )


@router.post("/reports", status_code=202, responses=UPLOAD_PROBLEM_RESPONSES)
def report(
    request: Request,
    session: SessionDep,
    principal: Annotated[Principal | None, Depends(optional_principal)],
    file: Annotated[UploadFile, File(description="The file believed to be a deepfake")],
    message: Annotated[str, Form(min_length=1, max_length=2000)],
    contact: Annotated[str | None, Form(max_length=200)] = None,
) -> ReportOut:
    """Report a file (public): traced like a verification, recorded on the audit trail for
    the admins and, when it traces to a job, for the owning tenant with that job: once per
    reporter, subject and window, at most ``reports_per_hour`` cases a reporter (429 past
    it). The reporter learns only whether this installation made it; the upload is not
    stored."""
    settings = get_state(request).settings
    keys = installation_keys(settings.provenance_path)
    data = read_upload(file, settings.verify_max_bytes)
    limits = ReportLimits(
        window_seconds=settings.report_window_seconds,
        per_hour=settings.reports_per_hour,
        per_subject=settings.reports_per_subject,
    )
    return report_file(
        session,
        keys,
        data,
        ReportIn(message=message, contact=contact),
        principal,
        str(getattr(request.state, "client_ip", "unknown")),
        max_bytes=settings.verify_max_bytes,
        limits=limits,
    )


_MANIFEST_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The C2PA manifest store", "content": {"application/c2pa": {}}},
    404: {"description": "No such job, or its result carries its manifest embedded"},
}


@router.get("/jobs/{job_id}/manifest", response_class=Response, responses=_MANIFEST_RESPONSES)
def get_manifest(
    job_id: uuid.UUID,
    request: Request,
    session: SessionDep,
    principal: Annotated[Principal, scoped("jobs:read")],
) -> Response:
    """The C2PA sidecar of a result whose format cannot embed one (WebM)."""
    store = tenant_store_for(get_state(request).settings)
    job = JobService(session, store).get(principal.tenant_id, job_id)
    if SIDECAR_NAME not in (job.outputs or []):
        raise NotFound("this job has no manifest sidecar (its result embeds the manifest)")
    data = store.get(principal.tenant_id, "outputs", job.id, SIDECAR_NAME)
    return Response(
        data,
        media_type="application/c2pa",
        headers={"Content-Disposition": f'attachment; filename="{job.id}.c2pa"'},
    )

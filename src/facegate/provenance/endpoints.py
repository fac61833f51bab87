"""HTTP routes of provenance: ``POST /v1/verify`` (public: anyone may ask whether this
installation made a file; unauthenticated callers are rate-limited per IP by the gateway),
``POST /v1/reports`` (public: report a suspected deepfake, an image or a video, to the
installation) and
``GET /v1/jobs/{id}/manifest`` (the C2PA sidecar of a WebM result)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import APIRouter, File, Form, Request, Response, UploadFile

from facegate.api.bodyguard import public_upload
from facegate.api.deps import OptionalPrincipalDep, SessionDep, get_state, scoped
from facegate.api.errors import PROBLEM_RESPONSES, UPLOAD_PROBLEM_RESPONSES
from facegate.api.uploads import read_upload
from facegate.errors import NotFound
from facegate.jobs.runtime import tenant_store_for
from facegate.jobs.service import JobService
from facegate.principal import Principal
from facegate.provenance.keys import InstallationKeys, load_keys
from facegate.provenance.limits import InspectLimits, authenticated_limits, public_limits
from facegate.provenance.marker import SIDECAR_NAME
from facegate.provenance.reports import ReportLimits, report_file
from facegate.provenance.schemas import ReportIn, ReportOut, VerifyOut
from facegate.provenance.tables import ProvenanceMark, ProvenanceReport
from facegate.provenance.verify import verify_file
from facegate.settings import Settings
from facegate.takedown.service import image_phash, open_case

router = APIRouter(prefix="/v1", tags=["provenance"], responses=PROBLEM_RESPONSES)
SIDECAR_MAX_BYTES = 1024 * 1024
T = TypeVar("T")


@lru_cache(maxsize=4)
def installation_keys(directory: Path) -> InstallationKeys:
    """Loaded once per process (a failure is not cached: keys mounted later are found)."""
    return load_keys(directory)


def inspect_limits(settings: Settings, principal: Principal | None) -> InspectLimits:
    """The limits of a verification: a caller with valid credentials gets the upload budget
    and the engine's limits, anyone else the public ones (``provenance.limits``)."""
    if principal is not None:
        return authenticated_limits(settings.verify_max_bytes)
    return public_limits(settings)


async def run_inspection(request: Request, principal: Principal | None, work: Callable[[], T]) -> T:
    """Run ``work`` (reading an upload's marks) in a worker thread; without credentials
    under the process-wide ``public_verify_concurrency`` (the others wait their turn, each
    holding its public-upload slot)."""
    limiter = get_state(request).public_verify_limiter if principal is None else None
    return await anyio.to_thread.run_sync(work, limiter=limiter)


@router.post("/verify", responses=UPLOAD_PROBLEM_RESPONSES)
@public_upload("verify_max_bytes")
async def verify(
    request: Request,
    session: SessionDep,
    principal: OptionalPrincipalDep,
    file: Annotated[UploadFile, File(description="The image or video to check")],
    manifest: Annotated[
        UploadFile | None,
        File(description="A WebM result's C2PA sidecar (GET /v1/jobs/{id}/manifest)"),
    ] = None,
) -> VerifyOut:
    """Whether this installation made the file (C2PA manifest and watermark); when, and the
    job and tenant, only to that tenant's keys and admins. The upload is not stored. Without
    credentials the upload and the video it may be are held to small public limits."""
    settings = get_state(request).settings
    keys = installation_keys(settings.provenance_path)
    limits = inspect_limits(settings, principal)

    def work() -> VerifyOut:
        data = read_upload(file, limits.max_bytes)
        sidecar = read_upload(manifest, SIDECAR_MAX_BYTES) if manifest is not None else None
        return verify_file(
            session,
            keys,
            data,
            principal,
            max_bytes=limits.max_bytes,
            sidecar=sidecar,
            limits=limits,
        )

    return await run_inspection(request, principal, work)


@router.post("/reports", status_code=202, responses=UPLOAD_PROBLEM_RESPONSES)
@public_upload("verify_max_bytes")
async def report(
    request: Request,
    session: SessionDep,
    principal: OptionalPrincipalDep,
    file: Annotated[UploadFile, File(description="The file believed to be a deepfake")],
    message: Annotated[str, Form(min_length=1, max_length=2000)],
    contact: Annotated[str | None, Form(max_length=200)] = None,
) -> ReportOut:
    """Report a file (public): an image or a video, under the same limits as
    ``POST /v1/verify``. Traced like a verification, recorded on the audit trail for the
    admins and, when it traces to a job, for the owning tenant with that job: once per
    reporter, subject and window, at most ``reports_per_hour`` cases a reporter (429 past
    it). The reporter learns only whether this installation made it; the upload is not
    stored."""
    settings = get_state(request).settings
    keys = installation_keys(settings.provenance_path)
    limits = inspect_limits(settings, principal)
    cases = ReportLimits(
        window_seconds=settings.report_window_seconds,
        per_hour=settings.reports_per_hour,
        per_subject=settings.reports_per_subject,
    )
    client_ip = str(getattr(request.state, "client_ip", "unknown"))

    def work() -> ReportOut:
        data = read_upload(file, limits.max_bytes)

        def open_takedown(case: ProvenanceReport, mark: ProvenanceMark | None) -> None:
            open_case(
                session,
                "system:reports",
                tenant_id=mark.tenant_id if mark is not None else None,
                job_id=mark.job_id if mark is not None else None,
                report_id=case.id,
                image_phash=image_phash(data),
            )

        return report_file(
            session,
            keys,
            data,
            ReportIn(message=message, contact=contact),
            principal,
            client_ip,
            max_bytes=limits.max_bytes,
            limits=cases,
            inspect=limits,
            on_case=open_takedown,
        )

    return await run_inspection(request, principal, work)


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

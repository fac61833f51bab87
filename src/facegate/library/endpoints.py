"""HTTP routes of the face library: save (``faces:write``), list and read (``faces:read``),
rename (``faces:write``), delete and export the stored image (``faces:manage``). Another
tenant's face id is a 404. ``POST /v1/faces`` finds the faces of one uploaded image for the
console's face picker: nothing is stored; faces come back in the selector's order, so a
face's ``index`` is the one ``face_index`` and a job's ``selector.mapping`` use."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, File, Form, Query, Request, Response, UploadFile
from sqlalchemy.orm import Session

from facegate.api.deps import SessionDep, get_state, run_in_session, scoped
from facegate.api.errors import PROBLEM_RESPONSES, UPLOAD_PROBLEM_RESPONSES
from facegate.api.uploads import read_upload
from facegate.database import session_scope
from facegate.engine.errors import ContentPolicyViolation
from facegate.engine.faces import FaceOrder, sort_faces
from facegate.engine.image import ImageLimits, load_image
from facegate.jobs.runtime import tenant_store_for, write_sessions
from facegate.library.repository import LibraryRepository
from facegate.library.schemas import (
    FaceOut,
    FaceUpdate,
    FoundFace,
    FoundFaces,
    check_name,
    parse_labels,
)
from facegate.library.service import FaceUpload, LibraryService
from facegate.principal import FACES_MANAGE, FACES_READ, FACES_WRITE, Principal
from facegate.provenance.endpoints import installation_keys
from facegate.takedown.service import check_sources
from facegate.tenancy.service import TenancyService

router = APIRouter(prefix="/v1/faces/library", tags=["faces"], responses=PROBLEM_RESPONSES)
# POST /v1/faces: the faces of one photo, for choosing the one to save (or a job's mapping).
detection_router = APIRouter(prefix="/v1", tags=["faces"], responses=UPLOAD_PROBLEM_RESPONSES)

Reader = Annotated[Principal, scoped(FACES_READ)]
Writer = Annotated[Principal, scoped(FACES_WRITE)]
Manager = Annotated[Principal, scoped(FACES_MANAGE)]


@router.post("", status_code=201, responses=UPLOAD_PROBLEM_RESPONSES)
def save_face(
    request: Request,
    session: SessionDep,
    principal: Writer,
    image: Annotated[UploadFile, File(description="A photo with the face to save")],
    name: Annotated[str, Form(max_length=400)],
    labels: Annotated[str | None, Form(description='JSON array, e.g. ["lead", "s01"]')] = None,
    face_index: Annotated[
        int, Form(ge=0, le=255, description="Which face, in `order` (POST /v1/faces)")
    ] = 0,
    order: Annotated[FaceOrder, Form()] = "large-small",
    consent: Annotated[
        str | None,
        Form(
            description='JSON {"attested_by", "statement_version", "attested_at"}: required '
            "when the tenant's policy has require_consent"
        ),
    ] = None,
) -> FaceOut:
    """Save a source face: the face is found and described once, here; jobs then name it
    (``source_face_id``) instead of uploading it."""
    state = get_state(request)
    store = tenant_store_for(state.settings)
    policy = TenancyService(session).get_policy(principal.tenant_id)
    # End the request's transaction (authentication may have written) before the seconds
    # of analysis: the write transaction below begins only once they are over.
    session.commit()
    upload = FaceUpload(
        data=read_upload(image, policy.max_input_bytes),
        name=check_name(name),
        labels=parse_labels(labels),
        face_index=face_index,
        order=order,
        consent=consent,
    )
    with state.face_analysis.hold(principal.tenant_id):
        # A taken-down image or face is refused here as it is as a job's source (451).
        with session_scope(state.session_factory, read_only=True) as read:
            check_sources(
                read,
                state.face_engine,
                lambda: installation_keys(state.settings.provenance_path),
                principal.tenant_id,
                [upload.data],
            )
        try:
            analysed = LibraryService.analyse(
                upload, principal.tenant_id, policy, state.face_engine
            )
        except ContentPolicyViolation as refused:
            with session_scope(write_sessions(state)) as write:
                LibraryService.record_refusal(write, principal.tenant_id, upload, refused)
            raise
    service: LibraryService | None = None
    try:
        with session_scope(write_sessions(state)) as write:
            service = LibraryService(write, store)
            policy = TenancyService(write).get_policy(principal.tenant_id)
            face = FaceOut.model_validate(service.save(principal, upload, analysed, policy))
    except BaseException:
        if service is not None:
            store.delete_keys(service.written)
        raise
    return face


@router.get("")
async def list_faces(
    request: Request,
    principal: Reader,
    label: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
) -> list[FaceOut]:
    """The tenant's saved faces, newest first (``label`` filters)."""

    def read(session: Session) -> list[FaceOut]:
        faces = LibraryRepository(session).list(principal.tenant_id, label=label, limit=limit)
        return [FaceOut.model_validate(face) for face in faces]

    return await run_in_session(request, read, read_only=True)


@router.get("/{face_id}")
def get_face(
    face_id: uuid.UUID, request: Request, session: SessionDep, principal: Reader
) -> FaceOut:
    store = tenant_store_for(get_state(request).settings)
    return FaceOut.model_validate(LibraryService(session, store).get(principal.tenant_id, face_id))


@router.patch("/{face_id}")
def update_face(
    face_id: uuid.UUID, body: FaceUpdate, request: Request, session: SessionDep, principal: Writer
) -> FaceOut:
    """Rename it and/or replace its labels (audited)."""
    store = tenant_store_for(get_state(request).settings)
    face = LibraryService(session, store).update(principal, face_id, body.name, body.labels)
    return FaceOut.model_validate(face)


@router.delete("/{face_id}", status_code=204, response_class=Response)
def delete_face(
    face_id: uuid.UUID, request: Request, session: SessionDep, principal: Manager
) -> Response:
    """Delete it: the stored image, the prepared source and the embedding (audited). Jobs
    that used it keep their own copy of the source until the tenant's retention."""
    store = tenant_store_for(get_state(request).settings)
    LibraryService(session, store).delete(principal, face_id)
    return Response(status_code=204)


@router.get(
    "/{face_id}/image",
    response_class=Response,
    responses={200: {"description": "The image as saved", "content": {"image/*": {}}}},
)
def export_face(
    face_id: uuid.UUID, request: Request, session: SessionDep, principal: Manager
) -> Response:
    """The image as it was saved (audited: exporting a face is a director's act)."""
    store = tenant_store_for(get_state(request).settings)
    face, data = LibraryService(session, store).export(principal, face_id)
    return Response(data, media_type=face.image_content_type)


@detection_router.post("/faces")
def detect_faces(
    request: Request,
    session: SessionDep,
    principal: Annotated[Principal, scoped("jobs:write")],
    image: Annotated[UploadFile, File(description="An image (a source or a target)")],
    order: Annotated[FaceOrder, Form(description="The selector order to index faces in")] = (
        "large-small"
    ),
) -> FoundFaces:
    """Detect faces (nothing is stored). Runs in the thread pool: analysis is CPU work."""
    policy = TenancyService(session).get_policy(principal.tenant_id)
    # Authentication may have written (last_used_at); end that transaction before the
    # seconds of analysis so SQLite's write lock is not held meanwhile.
    session.commit()
    data = read_upload(image, policy.max_input_bytes)
    state = get_state(request)
    with state.face_analysis.hold(principal.tenant_id):
        loaded = load_image(
            data, ImageLimits(max_bytes=policy.max_input_bytes, max_pixels=policy.max_input_pixels)
        )
        faces = sort_faces(state.face_engine.analyser.analyse(loaded.frame), order)
    return FoundFaces(
        width=loaded.width,
        height=loaded.height,
        order=order,
        faces=[
            FoundFace(
                index=i, box=[round(float(v), 1) for v in face.box], score=round(face.score, 4)
            )
            for i, face in enumerate(faces)
        ],
    )

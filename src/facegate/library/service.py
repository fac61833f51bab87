"""Face library rules: saving a face (the image decoded under the tenant's limits, the
chosen face found, its embedding and prepared source computed once, consent recorded where
the policy asks), renaming, deleting (stored objects and row, audited), and turning saved
faces into a job's sources."""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy.orm import Session

from facegate.consent.schemas import ConsentRef
from facegate.consent.service import ConsentService
from facegate.database import utcnow
from facegate.engine.errors import ContentPolicyViolation, NoFaceDetected
from facegate.engine.faces import sort_faces
from facegate.engine.identity import LEARNED
from facegate.engine.image import ImageLimits, encode_image, load_image
from facegate.engine.runtime import EngineRuntime
from facegate.engine.swap.reshape import face_shape
from facegate.engine.types import Face, Frame
from facegate.errors import Forbidden, InvalidInput, NotFound
from facegate.library.moderation import audit_allowed, audit_refused, moderate_library_image
from facegate.library.repository import LibraryRepository
from facegate.library.schemas import JobSources
from facegate.library.tables import LibraryFace
from facegate.mediatypes import media_type
from facegate.observability.audit import record_audit
from facegate.principal import FACES_READ, Principal
from facegate.storage.base import StorageQuotaExceeded
from facegate.storage.tenant import TenantStore
from facegate.tenancy.tables import Policy

FACE_SAVE: Final = "face.save"
FACE_UPDATE: Final = "face.update"
FACE_DELETE: Final = "face.delete"
FACE_EXPORT: Final = "face.export"
IMAGE: Final = "image"  # the uploaded image, as uploaded
PREPARED: Final = "face"  # the chosen face with its surroundings: what a job swaps from
# The prepared source keeps this much of the face's size around it on each side: enough
# for the detector and the mesh to find the face again, little of anyone beside it.
MARGIN = 0.6
# Consent is asked for as for a job using the face swapper (the library's purpose).
LIBRARY_PROCESSORS = ("face_swapper",)


@dataclass(frozen=True)
class FaceUpload:
    data: bytes
    name: str
    labels: list[str]
    face_index: int = 0
    order: str = "large-small"
    consent: str | None = None


@dataclass(frozen=True)
class AnalysedFace:
    """What saving a face computes once, before any transaction: the image's format and
    size, the chosen face's box, its embedding, how far it is turned (degrees) and the
    prepared source."""

    content_type: str
    width: int
    height: int
    box: list[float]
    embedding: list[float]
    embedding_kind: str
    turned: float
    prepared: bytes
    moderated: bool = False  # the image passed content moderation (False: the policy's off)


class LibraryService:
    """Rules on one tenant's library, in the caller's transaction. ``written`` collects
    the storage keys written, for the caller to delete if the transaction does not commit."""

    def __init__(self, session: Session, store: TenantStore) -> None:
        self.session = session
        self.store = store
        self.faces = LibraryRepository(session)
        self.written: list[str] = []

    def get(self, tenant_id: str, face_id: uuid.UUID) -> LibraryFace:
        face = self.faces.get(tenant_id, face_id)
        if face is None:
            raise NotFound("no such face in the library")
        return face

    @staticmethod
    def analyse(
        upload: FaceUpload, tenant_id: str, policy: Policy, engine: EngineRuntime
    ) -> AnalysedFace:
        """Check the consent field, decode the image under the tenant's limits, moderate it
        as a job's source (``library.moderation``), find the chosen face, describe it and
        cut its prepared source (CPU work, no database)."""
        ConsentService.check(upload.consent, 1, policy.require_consent, LIBRARY_PROCESSORS)
        limits = ImageLimits(max_bytes=policy.max_input_bytes, max_pixels=policy.max_input_pixels)
        loaded = load_image(upload.data, limits)
        moderated = moderate_library_image(tenant_id, policy.moderation, loaded.frame, engine.hub)
        found = sort_faces(engine.analyser.analyse(loaded.frame), upload.order)
        if not found:
            raise NoFaceDetected("no face was found in the image")
        if upload.face_index >= len(found):
            raise InvalidInput(
                f"face_index {upload.face_index} is out of range: the image has "
                f"{len(found)} face(s)",
                code="invalid-face-index",
            )
        chosen = found[upload.face_index]
        learned = engine.identity.attach(loaded.frame, [chosen])
        if chosen.embedding is None:
            raise NoFaceDetected("the chosen face could not be described")
        return AnalysedFace(
            content_type=media_type(loaded.format),
            width=loaded.width,
            height=loaded.height,
            box=[round(float(v), 1) for v in chosen.box],
            embedding=[round(float(v), 6) for v in chosen.embedding],
            embedding_kind=LEARNED if learned else "geometric",
            # Rounded up to a tenth: a face the swapper refuses (45.04°) never reads as usable.
            turned=math.ceil(face_shape(chosen.landmarks).turned * 10) / 10,
            prepared=encode_image(prepared_source(loaded.frame, chosen), "png"),
            moderated=moderated,
        )

    @staticmethod
    def record_refusal(
        session: Session, tenant_id: str, upload: FaceUpload, refused: ContentPolicyViolation
    ) -> None:
        """Audit a face moderation refused (in its own transaction: nothing is saved)."""
        audit_refused(session, tenant_id, refused, hashlib.sha256(upload.data).hexdigest())

    def save(
        self, principal: Principal, upload: FaceUpload, analysed: AnalysedFace, policy: Policy
    ) -> LibraryFace:
        """Store what :meth:`analyse` computed, with the consent record, in the caller's
        transaction (the storage quota read in it)."""
        tenant_id = principal.tenant_id
        try:
            self.store.check_quota(
                self.session,
                tenant_id,
                len(upload.data) + len(analysed.prepared),
                policy.storage_quota_bytes,
            )
        except StorageQuotaExceeded as exc:
            raise exc.problem() from None

        sha256 = hashlib.sha256(upload.data).hexdigest()
        face = LibraryFace(
            id=uuid.uuid4(),
            tenant_id=tenant_id,
            name=upload.name,
            labels=upload.labels,
            image_sha256=sha256,
            image_content_type=analysed.content_type,
            width=analysed.width,
            height=analysed.height,
            face_index=upload.face_index,
            face_order=upload.order,
            face_box=analysed.box,
            embedding=analysed.embedding,
            embedding_kind=analysed.embedding_kind,
            turned=analysed.turned,
            created_by=principal.actor[:200],
            created_at=utcnow(),
            updated_at=utcnow(),
        )
        refs = ConsentService(self.session).record(
            tenant_id, principal.actor, upload.consent, [(IMAGE, sha256)]
        )
        face.consent = refs[0].model_dump(mode="json") if refs else None
        for name, data, content_type in (
            (IMAGE, upload.data, face.image_content_type),
            (PREPARED, analysed.prepared, "image/png"),
        ):
            ref = self.store.put(
                self.session,
                tenant_id=tenant_id,
                kind="faces",
                job_id=face.id,
                name=name,
                data=data,
                content_type=content_type,
                new=True,
            )
            self.written.append(ref.key)
        self.faces.add(face)
        record_audit(
            self.session,
            principal,
            FACE_SAVE,
            f"face:{face.id}",
            {"name": face.name, "image_sha256": sha256, "consent": bool(refs)},
        )
        if analysed.moderated:
            audit_allowed(self.session, tenant_id, f"face:{face.id}", sha256)
        return face

    def update(
        self,
        principal: Principal,
        face_id: uuid.UUID,
        name: str | None,
        labels: list[str] | None,
    ) -> LibraryFace:
        face = self.get(principal.tenant_id, face_id)
        changes: dict[str, Any] = {}
        if name is not None and name != face.name:
            changes["name"] = {"from": face.name, "to": name}
            face.name = name
        if labels is not None and labels != face.labels:
            changes["labels"] = {"from": face.labels, "to": labels}
            face.labels = labels
        if changes:
            face.updated_at = utcnow()
            self.session.flush()
            record_audit(self.session, principal, FACE_UPDATE, f"face:{face.id}", changes)
        return face

    def delete(self, principal: Principal, face_id: uuid.UUID) -> int:
        """Remove the face: its stored objects (image and prepared source) and its row
        with the embedding; how many objects were removed. The consent attestation stays
        (append-only evidence)."""
        face = self.get(principal.tenant_id, face_id)
        removed = self.store.delete_job(self.session, principal.tenant_id, face.id)
        record_audit(
            self.session,
            principal,
            FACE_DELETE,
            f"face:{face.id}",
            {"name": face.name, "image_sha256": face.image_sha256, "objects": removed},
        )
        self.faces.delete(face)
        return removed

    def export(self, principal: Principal, face_id: uuid.UUID) -> tuple[LibraryFace, bytes]:
        face = self.get(principal.tenant_id, face_id)
        data = self.store.get(principal.tenant_id, "faces", face.id, IMAGE)
        record_audit(self.session, principal, FACE_EXPORT, f"face:{face.id}", {"name": face.name})
        return face, data

    def sources_for(
        self,
        principal: Principal,
        face_ids: Sequence[uuid.UUID],
        *,
        uploaded: bool,
        max_faces: int,
    ) -> JobSources | None:
        """The saved faces a job (or a batch) names as its sources, at most ``max_faces``;
        None when it names none (it uploads them). Naming faces needs ``faces:read``;
        uploading too is refused."""
        if not face_ids:
            return None
        if uploaded:
            raise InvalidInput(
                "send source images or source_face_id, not both", code="invalid-options"
            )
        if not principal.has(FACES_READ):
            raise Forbidden(f"using saved faces needs the {FACES_READ!r} scope", scope=FACES_READ)
        if len(face_ids) > max_faces:
            raise InvalidInput(f"at most {max_faces} source faces", code="invalid-options")
        return self.job_sources(principal.tenant_id, face_ids)

    def job_sources(self, tenant_id: str, face_ids: Sequence[uuid.UUID]) -> JobSources:
        """The prepared sources of ``face_ids`` (404 when one is not this tenant's)."""
        faces = {face.id: face for face in self.faces.get_many(tenant_id, face_ids)}
        missing = [str(i) for i in face_ids if i not in faces]
        if missing:
            raise NotFound(f"no such face in the library: {', '.join(missing)}")
        ordered = [faces[i] for i in face_ids]
        return JobSources(
            images=[self.store.get(tenant_id, "faces", face.id, PREPARED) for face in ordered],
            consent=[
                ConsentRef.model_validate({**face.consent, "source": f"source-{n}"})
                for n, face in enumerate(ordered)
                if face.consent
            ],
            missing_consent=[face.name for face in ordered if not face.consent],
        )


def prepared_source(frame: Frame, face: Face) -> Frame:
    """The face with a margin around it, cut from the frame (what a job's worker analyses
    as its source: one face, at the photo's own resolution)."""
    x1, y1, x2, y2 = (float(v) for v in face.box)
    margin = MARGIN * max(x2 - x1, y2 - y1)
    height, width = frame.shape[:2]
    left, top = max(0, int(x1 - margin)), max(0, int(y1 - margin))
    right, bottom = min(width, int(x2 + margin)), min(height, int(y2 + margin))
    return frame[top:bottom, left:right].copy()

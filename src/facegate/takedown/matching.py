"""Which jobs were made from one person's face: the recogniser's descriptor
(``engine/identity.py``, dlib's ResNet) of the person — from the reported job's retained
source, or a photo — against the retained sources of the jobs in scope and the saved faces
of the library, nearest first, with the distance.

A source image's descriptors are computed once per scan (by the sha256 of its bytes: a batch
of 100 items is one analysis) and dropped after it; nothing here stores one."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from sqlalchemy.orm import Session

from facegate.engine.errors import EngineError
from facegate.engine.identity import LEARNED, SAME_PERSON_DISTANCE, identity_distance
from facegate.engine.image import ImageLimits, load_image
from facegate.engine.runtime import EngineRuntime
from facegate.engine.types import FloatArray, Frame
from facegate.library.repository import LibraryRepository
from facegate.storage.base import ObjectNotFound
from facegate.storage.repository import StoredObjectRepository
from facegate.storage.tenant import TenantStore

#: Sources are decoded under these limits whatever the tenant's policy was (they were
#: accepted under it); a larger one is not compared.
SCAN_LIMITS = ImageLimits(max_bytes=200 * 1024 * 1024, max_pixels=200_000_000)
#: The longer side images are reduced to before their faces are described.
DESCRIBE_SIDE = 640


@dataclass(frozen=True)
class Match:
    tenant_id: str
    kind: str  # "job" | "face"
    item_id: uuid.UUID
    distance: float


@dataclass(frozen=True)
class ScanResult:
    matches: list[Match]
    sources_compared: int  # distinct source images described
    jobs_compared: int
    faces_compared: int
    seconds: float


def describe_frame(engine: EngineRuntime, frame: Frame) -> list[FloatArray]:
    """The recogniser's descriptor of every face found in ``frame``."""
    faces = engine.analyser.analyse(frame)
    if not faces or not engine.identity.attach(frame, faces):
        return []
    return [face.embedding for face in faces if face.embedding is not None]


def describe_image(
    engine: EngineRuntime, data: bytes, side: int | None = DESCRIBE_SIDE
) -> list[FloatArray]:
    """Descriptors of the faces of an encoded image ([] when it does not decode), reduced to
    ``side`` px on its longer side first (None: as it is)."""
    try:
        frame = load_image(data, SCAN_LIMITS).frame
    except (EngineError, ValueError):
        return []
    longer = max(frame.shape[:2])
    if side is not None and longer > side:
        # The recogniser's chip is 150 px: a face in a 640 px copy has all it needs, and the
        # analysis costs a fraction (the scan's time is this function's).
        scale = side / longer
        frame = np.asarray(
            cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA), np.uint8
        )
    return describe_frame(engine, frame)


def nearest(probe: Sequence[FloatArray], found: Iterable[FloatArray]) -> float | None:
    """The smallest distance between a probe descriptor and a found one."""
    distances = [identity_distance(p, f) for p in probe for f in found]
    return min(distances) if distances else None


def scan(
    session: Session,
    store: TenantStore,
    engine: EngineRuntime,
    probe: Sequence[FloatArray],
    tenant_ids: Sequence[str],
    *,
    threshold: float = SAME_PERSON_DISTANCE,
    describe_side: int | None = DESCRIBE_SIDE,
) -> ScanResult:
    """Every job (by its retained sources) and saved face of ``tenant_ids`` whose face is
    within ``threshold`` of one of the ``probe`` descriptors."""
    started = time.perf_counter()
    by_sha: dict[bytes, float | None] = {}
    best: dict[tuple[str, uuid.UUID], float] = {}
    jobs: set[uuid.UUID] = set()
    for tenant_id in tenant_ids:
        for row in StoredObjectRepository(session).sources(tenant_id):
            jobs.add(row.job_id)
            try:
                data = store.store.get(row.key)
            except ObjectNotFound:
                continue  # purged since the ledger was read
            digest = hashlib.sha256(data).digest()
            if digest not in by_sha:
                by_sha[digest] = nearest(probe, describe_image(engine, data, describe_side))
            distance = by_sha[digest]
            if distance is None or distance >= threshold:
                continue
            key = (tenant_id, row.job_id)
            best[key] = min(distance, best.get(key, distance))
    matches = [Match(t, "job", job, d) for (t, job), d in best.items()]
    faces = 0
    for tenant_id in tenant_ids:
        for face in LibraryRepository(session).all_of(tenant_id):
            if face.embedding_kind != LEARNED:
                continue  # a geometric descriptor says nothing about who it is
            faces += 1
            distance = nearest(probe, [np.asarray(face.embedding, np.float32)])
            if distance is not None and distance < threshold:
                matches.append(Match(tenant_id, "face", face.id, distance))
    matches.sort(key=lambda m: (m.distance, m.tenant_id, str(m.item_id)))
    return ScanResult(
        matches=matches,
        sources_compared=len(by_sha),
        jobs_compared=len(jobs),
        faces_compared=faces,
        seconds=time.perf_counter() - started,
    )

"""``POST /v1/faces``: the faces found in one uploaded image, for the console's face picker.

Nothing is stored: the image is decoded under the tenant's input limits, analysed, and
forgotten. Faces come back in the selector's order, so a face's ``index`` here is the index
a job's ``selector.mapping`` uses for the same image and the same ``order``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, UploadFile
from pydantic import BaseModel, Field

from facegate.api.deps import SessionDep, scoped
from facegate.api.errors import UPLOAD_PROBLEM_RESPONSES
from facegate.engine.errors import MediaTooLarge
from facegate.engine.faces import FaceOrder, sort_faces
from facegate.engine.image import ImageLimits, load_image
from facegate.engine.pipeline import default_analyser
from facegate.principal import Principal
from facegate.tenancy.service import TenancyService

router = APIRouter(prefix="/v1", tags=["faces"], responses=UPLOAD_PROBLEM_RESPONSES)


class FoundFace(BaseModel):
    """One detected face: its position in selector order, its box in upright image pixels
    (x1, y1, x2, y2) and the detector's score."""

    index: int
    box: list[float] = Field(min_length=4, max_length=4)
    score: float


class FoundFaces(BaseModel):
    """The upright image's size and its faces."""

    width: int
    height: int
    order: str
    faces: list[FoundFace]


def read_limited(upload: UploadFile, max_bytes: int) -> bytes:
    """The upload's bytes, or MediaTooLarge (413) past the tenant's ``max_input_bytes``."""
    data = upload.file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise MediaTooLarge(
            f"the image is over the {max_bytes}-byte limit",
            limit_name="max_bytes",
            limit=max_bytes,
            actual=upload.size or len(data),
        )
    return data


@router.post("/faces")
def detect_faces(
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
    data = read_limited(image, policy.max_input_bytes)
    loaded = load_image(
        data, ImageLimits(max_bytes=policy.max_input_bytes, max_pixels=policy.max_input_pixels)
    )
    faces = sort_faces(default_analyser().analyse(loaded.frame), order)
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

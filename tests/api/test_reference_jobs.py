"""Selector mode ``reference`` through ``POST /v1/jobs``: the form field ``reference`` is an
image of the person whose faces are replaced. Of a group photo, only the faces of the person
in the reference change; a reference without the mode, or the mode without a reference, is
refused (422, nothing stored)."""

from __future__ import annotations

import json
from typing import Any

import cv2
import numpy as np
import pytest
from tests.api.jobhelpers import (
    DEBUG_TENANT_POLICY,
    count_jobs,
    count_objects,
    is_problem,
    job_files,
    photo,
    wait_terminal,
)
from tests.testdata import FACES

from facegate.engine.faces import FaceAnalyser, sort_faces
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)

GROUP = FACES / "group_2_women_laughing_angled.jpg"
SWAP = {"processors": ["face_swapper"], "output": {"format": "png"}}
BY_REFERENCE = {**SWAP, "selector": {"mode": "reference"}}


def png(frame: np.ndarray) -> bytes:
    ok, data = cv2.imencode(".png", frame)
    assert ok
    return data.tobytes()


def with_reference(target: bytes, source: bytes, reference: bytes) -> list[Any]:
    return [*job_files(target, [source]), ("reference", ("r.png", reference, "image/png"))]


async def test_only_the_referenced_person_is_swapped(make_client: Any) -> None:
    group = cv2.imread(str(GROUP))
    faces = sort_faces(FaceAnalyser().analyse(group), "left-right")
    assert len(faces) == 2
    left, right = faces
    # The reference: the right-hand woman alone, cut from the photo with a margin.
    x1, y1, x2, y2 = (int(v) for v in right.box)
    pad = (x2 - x1) // 2
    reference = png(group[max(y1 - pad, 0) : y2 + pad, max(x1 - pad, 0) : x2 + pad])
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = h.headers("acme")
        response = await h.client.post(
            "/v1/jobs",
            headers=headers,
            files=with_reference(png(group), photo("man_frontal_glasses.jpg", 320), reference),
            data={"options": json.dumps(BY_REFERENCE)},
        )
        assert response.status_code == 202, response.text
        body = await wait_terminal(h.client, headers, response.json()["id"])
        assert body["status"] == "succeeded", body
        result = await h.client.get(f"/v1/jobs/{body['id']}/result", headers=headers)
    image = cv2.imdecode(np.frombuffer(result.content, np.uint8), cv2.IMREAD_COLOR)

    def changed(face: Any) -> float:
        bx1, by1, bx2, by2 = (int(v) for v in face.box)
        region = np.s_[by1:by2, bx1:bx2]
        return float(np.abs(image[region].astype(int) - group[region].astype(int)).mean())

    # The watermark changes every pixel by a few levels; a swapped face by far more.
    assert changed(right) > 10 > 4 > changed(left), (changed(left), changed(right))


@pytest.mark.parametrize(
    ("options", "send_reference"),
    [(BY_REFERENCE, False), (SWAP, True)],
    ids=["no-image", "no-mode"],
)
async def test_mode_and_image_come_together_or_the_job_is_refused(
    make_client: Any, options: dict[str, Any], send_reference: bool
) -> None:
    async with make_client() as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        files = job_files(photo(), [photo("man_frontal_glasses.jpg")])
        if send_reference:
            files.append(("reference", ("r.jpg", photo(), "image/jpeg")))
        response = await h.client.post(
            "/v1/jobs",
            headers=h.headers("acme"),
            files=files,
            data={"options": json.dumps(options)},
        )
        assert response.status_code == 422, response.text
        assert is_problem(response)
        assert response.json()["type"].endswith("invalid-options")
        assert "reference" in response.json()["detail"]
        assert count_jobs(h.state) == count_objects(h.state) == 0

"""The quality report of every swapped face through the API (``engine.report``): shown in
``GET /v1/jobs/{id}``; a profile target is ``not transferred``; the tenant's ``weak_swap``
policy keeps it (flagged), leaves it untouched or fails the job naming the face."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, submit, wait_terminal
from tests.testdata import FACES

from facegate.engine.identity import available
from facegate.engine.video.quality import SAMPLED_FRAMES
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.observability.metrics import SWAP_IDENTITY
from facegate.worker.embedded import workers_service

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not FACES.is_dir(), reason=f"test photos not at {FACES}"),
    pytest.mark.skipif(not available(), reason="the recogniser (dlib) is not installed"),
]

SOURCE = "woman_a_selfie_frontal_01.jpg"
FRONTAL = "woman_astronaut_frontal.jpg"
PROFILE = "man_profile_grayscale_occluded.png"  # yaw ~53°: the swap takes no identity
OPTIONS = json.dumps({"processors": ["face_swapper"], "output": {"format": "png"}})


def photo(name: str, side: int = 480) -> bytes:
    frame = cv2.imread(str(FACES / name), cv2.IMREAD_COLOR)
    scale = min(1.0, side / max(frame.shape[:2]))
    frame = cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    ok, data = cv2.imencode(".png", frame)
    assert ok
    return data.tobytes()


async def run_job(h: Any, tenant: str, target: str) -> dict[str, Any]:
    headers = h.headers(tenant)
    response = await submit(
        h.client, headers, target=photo(target), sources=[photo(SOURCE)], data={"options": OPTIONS}
    )
    assert response.status_code == 202, response.text
    return await wait_terminal(h.client, headers, response.json()["id"])


def observed(tenant: str, verdict: str) -> float:
    for metric in SWAP_IDENTITY.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels == {
                "tenant": tenant,
                "verdict": verdict,
            }:
                return sample.value
    return 0.0


async def test_every_swapped_face_has_a_quality_report(make_client: Any) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("keep", **DEBUG_TENANT_POLICY)
        h.create_tenant("untouched", weak_swap="untouched", **DEBUG_TENANT_POLICY)
        h.create_tenant("fail", weak_swap="fail", **DEBUG_TENANT_POLICY)
        before = observed("keep", "not transferred")

        frontal = await run_job(h, "keep", FRONTAL)
        assert frontal["status"] == "succeeded", frontal
        (face,) = frontal["result"]["quality"]
        assert face["verdict"] == "transferred", face
        assert face["d_source"] < 0.6 < face["d_target"]
        assert face["tone"] is not None
        assert face["action"] == "kept"

        # A profile target: kept and flagged (the default policy), counted in the histogram.
        profile = await run_job(h, "keep", PROFILE)
        assert profile["status"] == "succeeded", profile
        (face,) = profile["result"]["quality"]
        assert face["verdict"] == "not transferred", face
        assert face["action"] == "kept"
        assert abs(face["yaw"]) > 35
        assert observed("keep", "not transferred") == before + 1

        # Left untouched: the result's face is the target's.
        untouched = await run_job(h, "untouched", PROFILE)
        assert untouched["status"] == "succeeded", untouched
        (face,) = untouched["result"]["quality"]
        assert face["action"] == "untouched"
        headers = h.headers("untouched")
        result = await h.client.get(f"/v1/jobs/{untouched['id']}/result", headers=headers)
        image = cv2.imdecode(np.frombuffer(result.content, np.uint8), cv2.IMREAD_COLOR)
        original = cv2.imdecode(np.frombuffer(photo(PROFILE), np.uint8), cv2.IMREAD_COLOR)
        x0, y0, x1, y1 = (int(v) for v in face["box"])
        # Within the watermark's few levels of the target (engine/watermark.py).
        diff = cv2.absdiff(image[y0:y1, x0:x1], original[y0:y1, x0:x1])
        assert float(np.percentile(diff, 99)) <= 8

        # Failed: the job's error names the face and its figure.
        failed = await run_job(h, "fail", PROFILE)
        assert failed["status"] == "failed", failed
        assert failed["error"]["type"] == "weak-swap"
        assert "face 1" in failed["error"]["detail"]
        assert "not transferred" in failed["error"]["detail"]
        assert f"{face['d_source']:.3f}" in failed["error"]["detail"]
        refused = await h.client.get(f"/v1/jobs/{failed['id']}/result", headers=h.headers("fail"))
        assert refused.headers["content-type"].startswith("application/problem+json")
        problem = refused.json()
        assert problem["type"].endswith("/weak-swap"), problem
        assert "face 1" in problem["detail"]
        # A transferred face does not fail the job.
        ok = await run_job(h, "fail", FRONTAL)
        assert ok["status"] == "succeeded", ok


async def test_a_videos_sampled_frames_have_quality_reports(
    make_client: Any, tmp_path: Path
) -> None:
    """A video job's result lists the swapped face of a few sampled frames (not every frame:
    the recogniser costs ~0.1 s a pass), each an image report with its frame's index."""
    clip = tmp_path / "clip.mp4"
    frames = make_face_clip(
        clip, FACES / FRONTAL, ClipSpec(seconds=2.0, fps=10, width=320, height=240, audio=False)
    )
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("video", **DEBUG_TENANT_POLICY)
        headers = h.headers("video")
        before = observed("video", "transferred")
        started = time.perf_counter()
        response = await h.client.post(
            "/v1/jobs",
            headers=headers,
            files=[
                ("source", ("s.png", photo(SOURCE), "image/png")),
                ("target", ("clip.mp4", clip.read_bytes(), "video/mp4")),
            ],
            data={"options": json.dumps({"processors": ["face_swapper"]})},
        )
        assert response.status_code == 202, response.text
        job = await wait_terminal(h.client, headers, response.json()["id"])
        print(f"video job of {frames} frames: {time.perf_counter() - started:.1f} s")
        assert job["status"] == "succeeded", job
        reports = job["result"]["quality"]
        sampled = sorted({face["frame"] for face in reports})
        # One face in every frame: one report per span of the clip, spread over its length.
        assert len(sampled) == SAMPLED_FRAMES == len(reports), reports
        span = frames / SAMPLED_FRAMES
        for k, index in enumerate(sampled):
            assert (k + 0.5) * span <= index < (k + 1) * span, sampled
        for face in reports:
            assert face["verdict"] == "transferred", face
            assert face["d_source"] < 0.6 < face["d_target"]
            assert face["tone"] is not None
            assert face["action"] == "kept"
            assert abs(face["yaw"]) < 30
        assert observed("video", "transferred") == before + len(reports)
        # An image job's faces carry no frame.
        image = await run_job(h, "video", FRONTAL)
        assert [face["frame"] for face in image["result"]["quality"]] == [None]

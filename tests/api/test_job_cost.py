"""Every submitted job carries its estimated cost (facegate.jobs.cost), computed from the
target as decoded or probed: the scheduler's short lane and memory budget read it."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from jobhelpers import photo, submit
from PIL import Image

from facegate.database import session_scope
from facegate.jobs.cost import TargetShape, estimate_cost
from facegate.jobs.tables import Job

LANE_SECONDS = 5.0  # FACEGATE_SHORT_LANE_SECONDS' default


def test_the_short_lane_gets_face_work_on_photos_and_never_long_work() -> None:
    def seconds(
        processors: list[str], shape: TargetShape, video: bool = False, **opts: Any
    ) -> float:
        return estimate_cost(processors, opts, shape, video=video).seconds

    photo_1080p = TargetShape(1920, 1080)
    assert seconds(["face_swapper"], photo_1080p) <= LANE_SECONDS
    assert seconds(["face_swapper", "face_enhancer"], photo_1080p) <= LANE_SECONDS
    uhd = TargetShape(3840, 2160)
    assert seconds(["frame_enhancer"], uhd) > LANE_SECONDS
    x4plus = {"frame_enhancer": {"model": "real_esrgan_x4plus"}}
    assert seconds(["frame_enhancer"], uhd, **x4plus) > seconds(["frame_enhancer"], uhd)
    minute_720p = TargetShape(1280, 720, frames=1800)
    assert seconds(["face_swapper"], minute_720p, video=True) > LANE_SECONDS
    assert seconds(["face_swapper"], TargetShape(1280, 720, frames=30), video=True) <= LANE_SECONDS


def test_memory_grows_with_the_frame_and_the_upscale() -> None:
    small = estimate_cost(["face_swapper"], {}, TargetShape(640, 480), video=False)
    large = estimate_cost(["face_swapper"], {}, TargetShape(3840, 2160), video=False)
    upscaled = estimate_cost(["frame_enhancer"], {}, TargetShape(3840, 2160), video=False)
    assert small.memory_bytes < large.memory_bytes < upscaled.memory_bytes


@pytest.mark.parametrize("width", [160, 1000])
async def test_a_submitted_job_carries_the_estimate_of_its_real_target(
    make_client: Any, width: int
) -> None:
    async with make_client() as h:
        headers = h.headers("acme")
        target = photo(width=width)
        response = await submit(h.client, headers, target=target, sources=[photo()], data={})
        assert response.status_code == 202, response.text
        with session_scope(h.state.session_factory) as session:
            job = session.get(Job, uuid.UUID(response.json()["id"]))
            assert job is not None
            estimated, memory = job.estimated_seconds, job.memory_bytes
    size = Image.open(io.BytesIO(target)).size
    expected = estimate_cost(["face_swapper"], {}, TargetShape(*size), video=False)
    assert (estimated, memory) == (expected.seconds, expected.memory_bytes)

"""Video targets through ``POST /v1/jobs``: told apart by content, refused at the door when
over the policy (nothing stored), run with progress (fps, ETA) on the job and its event
stream, cancelled mid-run with no result left behind."""

from __future__ import annotations

import asyncio
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import av
import httpx
import pytest
from sqlalchemy import func, select
from tests.testdata import FACES

from facegate.database import session_scope
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.jobs.tables import Job
from facegate.storage.tables import StoredObject
from facegate.worker.embedded import workers_service

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

TARGET_FACE = FACES / "woman_a_frontal_blue_wall_02.jpg"
SOURCE_FACE = FACES / "man_frontal_glasses.jpg"
TERMINAL = {"succeeded", "failed", "cancelled"}


def create_clip(path: Path, **spec: Any) -> bytes:
    make_face_clip(path, TARGET_FACE, ClipSpec(**spec))
    return path.read_bytes()


def video_files(clip: bytes, name: str = "clip.mp4") -> list[tuple[str, tuple[str, bytes, str]]]:
    return [
        ("source", ("s.jpg", SOURCE_FACE.read_bytes(), "image/jpeg")),
        ("target", (name, clip, "video/mp4")),
    ]


async def submit_video(
    client: httpx.AsyncClient, headers: dict[str, str], clip: bytes, **options: Any
) -> httpx.Response:
    data = {"options": json.dumps(options)} if options else None
    return await client.post("/v1/jobs", headers=headers, files=video_files(clip), data=data)


async def wait_for(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    job_id: str,
    done: Any,
    timeout: float = 240.0,
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        body: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}", headers=headers)).json()
        if done(body) or loop.time() > deadline:
            return body
        await asyncio.sleep(0.05)


@pytest.fixture
def scratch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temporary-files folder, to see what a video run leaves behind in it."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def video_scratch(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("facegate-video-"))


def count_rows(state: Any, model: Any) -> int:
    with session_scope(state.session_factory) as session:
        return int(session.execute(select(func.count()).select_from(model)).scalar_one())


def describe(data: bytes) -> tuple[int, float, bool]:
    """(video frames, audio seconds, has audio) of an encoded clip."""
    with av.open(io.BytesIO(data)) as container:
        frames = sum(1 for _ in container.decode(video=0))
    with av.open(io.BytesIO(data)) as container:
        if not container.streams.audio:
            return frames, 0.0, False
        seconds = sum(f.samples / f.sample_rate for f in container.decode(audio=0))
    return frames, seconds, True


async def test_a_video_job_runs_with_progress_and_keeps_frames_and_audio(
    make_client: Any, tmp_path: Path, scratch_root: Path
) -> None:
    clip = create_clip(tmp_path / "in.mp4", seconds=1.0, width=320, height=240)
    async with make_client(services=[workers_service], workers=1) as h:
        headers = h.headers("studio")
        response = await submit_video(h.client, headers, clip)
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        assert response.json()["kind"] == "video"

        async with h.client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as stream:
            events = [
                json.loads(line[5:]) async for line in stream.aiter_lines() if line[:5] == "data:"
            ]
        body = await wait_for(h.client, headers, job_id, lambda b: b["status"] in TERMINAL)
        assert body["status"] == "succeeded", body
        assert body["progress"] == 1.0
        detail = body["progress_detail"]
        assert detail["frames_done"] == detail["frames_total"] == 30
        assert detail["fps"] > 0
        assert detail["eta_seconds"] == 0
        # The stream carried the same detail while the job ran.
        assert any((e.get("progress_detail") or {}).get("frames_done") for e in events)

        result = body["result"]
        assert result["content_type"] == "video/mp4"
        assert (result["frames"], result["width"], result["height"]) == (30, 320, 240)
        assert result["pixels"] == 30 * 320 * 240
        download = await h.client.get(f"/v1/jobs/{job_id}/result", headers=headers)
        assert download.headers["content-type"] == "video/mp4"
        frames, audio_seconds, has_audio = describe(download.content)
        assert abs(frames - 30) <= 1
        assert has_audio
        assert abs(audio_seconds - 1.0) < 0.1
        assert result["bytes"] == len(download.content)
        # The result was streamed to storage from the run's folder, which is gone now.
        assert video_scratch(scratch_root) == []


async def test_over_the_video_length_limit_is_refused_and_nothing_is_stored(
    make_client: Any, tmp_path: Path
) -> None:
    clip = create_clip(tmp_path / "long.mp4", seconds=3.0, width=160, height=120, fps=10)
    async with make_client() as h:
        h.create_tenant("short", max_video_seconds=2)
        headers = h.headers("short")
        response = await submit_video(h.client, headers, clip)
        assert response.status_code == 413
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert problem["limit"] == "max_video_seconds"
        assert problem["limit_value"] == 2
        assert "max_video_seconds" in problem["detail"]
        assert count_rows(h.state, Job) == 0
        assert count_rows(h.state, StoredObject) == 0


async def test_the_output_is_scaled_down_to_the_tenants_resolution(
    make_client: Any, tmp_path: Path
) -> None:
    clip = create_clip(tmp_path / "big.mp4", seconds=0.2, width=1440, height=810, fps=10)
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("small", max_output_resolution="720p")
        headers = h.headers("small")
        response = await submit_video(h.client, headers, clip)
        assert response.status_code == 202, response.text
        body = await wait_for(
            h.client, headers, response.json()["id"], lambda b: b["status"] in TERMINAL
        )
        assert body["status"] == "succeeded", body
        assert (body["result"]["width"], body["result"]["height"]) == (1280, 720)
        assert body["result"]["frames"] == 2


async def test_cancelling_a_running_video_job_leaves_no_result(
    make_client: Any, tmp_path: Path, scratch_root: Path
) -> None:
    clip = create_clip(tmp_path / "slow.mp4", seconds=20.0, width=320, height=240)
    # The whole run's cancel (a segmented job's: tests/jobs/test_segmented_video.py).
    async with make_client(services=[workers_service], workers=1, video_segment_seconds=0) as h:
        headers = h.headers("studio")
        job_id = (await submit_video(h.client, headers, clip)).json()["id"]
        running = await wait_for(
            h.client,
            headers,
            job_id,
            lambda b: b["status"] in TERMINAL or (b["progress_detail"] or {}).get("frames_done"),
        )
        assert running["status"] == "running", running
        cancelled = await h.client.delete(f"/v1/jobs/{job_id}", headers=headers)
        assert cancelled.status_code == 200
        body = await wait_for(
            h.client, headers, job_id, lambda b: b["status"] in TERMINAL, timeout=10
        )
        assert body["status"] == "cancelled", body
        assert body["progress"] < 1.0
        assert body["result"] is None
        assert (await h.client.get(f"/v1/jobs/{job_id}/result", headers=headers)).status_code == 409
        with session_scope(h.state.session_factory) as session:
            kinds = session.scalars(select(StoredObject.kind)).all()
        assert sorted(kinds) == ["inputs", "inputs"]  # the source and the target, no output
        assert video_scratch(scratch_root) == []

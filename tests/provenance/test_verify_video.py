"""Video results: an MP4 carries its manifest (c2pa validates it), a WebM gets a sidecar the
API serves; both carry the watermark in their frames, and both verify as this
installation's, traced to the job for its owner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.api.jobhelpers import wait_terminal
from tests.provenance.test_verify_api import c2pa_state
from tests.testdata import FACES

from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.provenance.keys import load_keys
from facegate.worker.embedded import workers_service

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


async def test_mp4_and_webm_results_are_marked_and_verified(
    make_client: Any, tmp_path: Path
) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        owner = h.headers("studio")
        ca_pem = load_keys(h.state.settings.provenance_path).ca_pem
        for suffix, mime in ((".mp4", "video/mp4"), (".webm", "video/webm")):
            clip = tmp_path / f"in{suffix}"
            # 640x360 for WebM: VP9 at the engine's quality (crf 33, realtime) keeps the mark
            # in every run there, in about half of them at 320x240 (docs/provenance.md).
            size = (
                {"width": 640, "height": 360}
                if suffix == ".webm"
                else {"width": 320, "height": 240}
            )
            make_face_clip(
                clip, FACES / "woman_a_frontal_blue_wall_02.jpg", ClipSpec(seconds=1.0, **size)
            )
            files = [
                (
                    "source",
                    ("s.jpg", (FACES / "man_frontal_glasses.jpg").read_bytes(), "image/jpeg"),
                ),
                ("target", (clip.name, clip.read_bytes(), mime)),
            ]
            response = await h.client.post("/v1/jobs", headers=owner, files=files)
            assert response.status_code == 202, response.text
            job = await wait_terminal(h.client, owner, response.json()["id"], timeout=240)
            assert job["status"] == "succeeded", job
            assert job["result"]["content_type"] == mime
            data = (await h.client.get(f"/v1/jobs/{job['id']}/result", headers=owner)).content
            sidecar = await h.client.get(f"/v1/jobs/{job['id']}/manifest", headers=owner)
            upload = [("file", (f"x{suffix}", data, mime))]
            if suffix == ".mp4":
                state, _ = c2pa_state(data, mime, ca_pem)
                assert state == "Trusted"
                assert sidecar.status_code == 404  # embedded: nothing beside it
            else:
                assert sidecar.status_code == 200
                assert sidecar.headers["content-type"] == "application/c2pa"
                upload.append(("manifest", ("m.c2pa", sidecar.content, "application/c2pa")))
            result = (await h.client.post("/v1/verify", headers=owner, files=upload)).json()
            assert result["media"] == "video"
            assert result["manifest"]["state"] == "valid", (suffix, result)
            assert result["manifest"]["signed_by_this_installation"]
            assert result["watermark"]["frames_read"] > 1
            assert result["job"]["job_id"] == job["id"]
            assert result["watermark"]["found"], suffix
            assert sorted(result["job"]["traced_by"]) == ["manifest", "watermark"]

            # The public learns it was made here, and nothing of the job.
            public = (await h.client.post("/v1/verify", files=upload)).json()
            assert public["made_by_this_installation"]
            assert public["job"] is None
            if suffix == ".webm":
                # The sidecar binds to the file's bytes: another file does not match it.
                other = [("file", ("x.webm", data[:-1] + b"\0", mime)), upload[1]]
                changed = (await h.client.post("/v1/verify", files=other)).json()
                assert changed["manifest"]["state"] == "tampered"

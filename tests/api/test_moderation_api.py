"""Content moderation end to end on the embedded shape (SQLite, in-process workers), with the
stand-in classifier (tests/moderationkit.py) installed in the model store: a flagged source
is refused, a flagged output fails the job with nothing stored, a clean job succeeds, and
the audit trail and the metric show each decision. Only an admin turns moderation off."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from jobhelpers import DEBUG_TENANT_POLICY, is_problem, photo, submit, wait_batch, wait_terminal
from sqlalchemy import select
from tests.moderationkit import (
    FLAG_OUTPUT,
    SWAP,
    decisions,
    install_standin,
    marked,
    options,
    standin_classifier,
    steady_times,
    with_marker,
    write_clip,
)
from tests.testdata import FACES

from facegate.database import session_scope
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.moderation import Moderator
from facegate.engine.video.synth import ClipSpec, make_face_clip
from facegate.observability.audit.tables import AuditEvent
from facegate.storage.tables import StoredObject
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)


def audit_events(h: Any, action_prefix: str = "moderation.") -> list[AuditEvent]:
    with session_scope(h.state.session_factory) as session:
        rows = session.scalars(select(AuditEvent).order_by(AuditEvent.seq)).all()
        return [e for e in rows if e.action.startswith(action_prefix)]


def outputs_stored(h: Any, job_id: str) -> int:
    with session_scope(h.state.session_factory) as session:
        rows = session.scalars(select(StoredObject).where(StoredObject.kind == "outputs")).all()
        return sum(str(row.job_id) == job_id for row in rows)


@pytest.fixture
def standin(tmp_path: Path) -> None:
    install_standin(tmp_path / "models")


@pytest.mark.usefixtures("standin")
async def test_flagged_source_flagged_output_clean_job(make_client: Any) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("modded", **DEBUG_TENANT_POLICY)
        headers = h.headers("modded")
        before = decisions((await h.client.get("/metrics")).text, "modded")

        # 1. a flagged source: refused before the job runs, nothing of the job stored
        response = await submit(h.client, headers, photo(), [marked(photo())], options(SWAP))
        refused = await wait_terminal(h.client, headers, response.json()["id"])
        assert refused["status"] == "failed", refused
        assert refused["error"]["type"] == "content-policy-violation"
        assert "source image 1" in refused["error"]["detail"]
        assert "score" not in refused["error"]["detail"]
        assert outputs_stored(h, refused["id"]) == 0

        # 2. clean inputs whose output is flagged: the job fails, no result is stored
        response = await submit(h.client, headers, photo(), None, options(FLAG_OUTPUT))
        flagged = await wait_terminal(h.client, headers, response.json()["id"])
        assert flagged["status"] == "failed", flagged
        assert flagged["error"]["type"] == "content-policy-violation"
        assert flagged["error"]["detail"].startswith("output ")
        assert outputs_stored(h, flagged["id"]) == 0
        result = await h.client.get(f"/v1/jobs/{flagged['id']}/result", headers=headers)
        assert result.status_code == 422
        assert is_problem(result)
        assert result.json()["type"].endswith("/content-policy-violation")
        assert result.json()["detail"] == flagged["error"]["detail"]

        # 3. a clean swap succeeds, its inputs and output checked
        response = await submit(
            h.client, headers, photo(), [photo("man_frontal_glasses.jpg")], options(SWAP)
        )
        clean = await wait_terminal(h.client, headers, response.json()["id"])
        assert clean["status"] == "succeeded", clean
        assert outputs_stored(h, clean["id"]) == 1

        events = {e.target: e for e in audit_events(h)}
        assert events[f"job:{refused['id']}"].action == "moderation.refused"
        assert events[f"job:{refused['id']}"].details["refused"] == "source image 1"
        assert events[f"job:{flagged['id']}"].details["refused"] == "output"
        assert events[f"job:{clean['id']}"].action == "moderation.allowed"
        assert events[f"job:{clean['id']}"].details["allowed"] == [
            "source image 1",
            "target image",
            "output",
        ]
        assert all(e.tenant_id == "modded" for e in events.values())
        # the tenant sees its own moderation events
        listed = (
            await h.client.get("/v1/audit", headers=h.headers("modded", ["audit:read"]))
        ).json()
        assert {"moderation.refused", "moderation.allowed"} <= {
            item["action"] for item in listed["events"]
        }

        after = decisions((await h.client.get("/metrics")).text, "modded")
        assert after.get("refused", 0) - before.get("refused", 0) == 2
        # flagged-output job: its target; clean job: source, target, output
        assert after.get("allowed", 0) - before.get("allowed", 0) == 4


@pytest.mark.usefixtures("standin")
async def test_moderation_off_only_by_an_admin(make_client: Any) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("lax", **DEBUG_TENANT_POLICY)
        tenant = h.headers("lax")
        admin = h.headers("root", scopes=["admin"])
        policy = {**DEBUG_TENANT_POLICY, "moderation": False}

        # a tenant key cannot change its policy, moderation included
        denied = await h.client.put("/v1/admin/tenants/lax/policy", headers=tenant, json=policy)
        assert denied.status_code == 403
        assert is_problem(denied)
        got = await h.client.get("/v1/admin/tenants/lax/policy", headers=admin)
        assert got.json()["moderation"] is True  # on by default

        changed = await h.client.put("/v1/admin/tenants/lax/policy", headers=admin, json=policy)
        assert changed.status_code == 200
        assert changed.json()["moderation"] is False
        response = await submit(h.client, tenant, photo(), None, options(FLAG_OUTPUT))
        body = await wait_terminal(h.client, tenant, response.json()["id"])
        assert body["status"] == "succeeded", body  # not moderated: the marker passes
        assert f"job:{body['id']}" not in {e.target for e in audit_events(h)}
        assert decisions((await h.client.get("/metrics")).text, "lax").get("disabled", 0) >= 1
        change = audit_events(h, "policy.change")[-1]
        assert change.details["moderation"] is False
        assert change.actor.startswith("key:")


async def run_video_jobs(h: Any, headers: dict[str, str], clips: dict[str, Path]) -> dict[str, Any]:
    """Each clip as a job's target (face_debugger, the output flagged where a face is
    found); each job's final body, by name."""
    results = {}
    for name, clip in clips.items():
        response = await h.client.post(
            "/v1/jobs",
            headers=headers,
            files=[("target", ("clip.mp4", clip.read_bytes(), "video/mp4"))],
            data=options(FLAG_OUTPUT),
        )
        assert response.status_code == 202, response.text
        results[name] = await wait_terminal(h.client, headers, response.json()["id"])
    return results


@pytest.mark.usefixtures("standin")
async def test_video_checked_by_sampled_frames(make_client: Any, tmp_path: Path) -> None:
    """A flagged frame in the target video refuses it; a flagged output video fails its job."""
    marked_photo = tmp_path / "marked.jpg"
    marked_photo.write_bytes(marked((FACES / "woman_a_frontal_blue_wall_02.jpg").read_bytes()))
    spec = ClipSpec(seconds=2.0, fps=10, width=320, height=240, audio=False)
    flagged_clip, clean_clip = tmp_path / "flagged.mp4", tmp_path / "clean.mp4"
    make_face_clip(flagged_clip, marked_photo, spec)
    make_face_clip(clean_clip, FACES / "woman_a_frontal_blue_wall_02.jpg", spec)
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("video", **DEBUG_TENANT_POLICY)
        headers = h.headers("video")
        results = await run_video_jobs(
            h, headers, {"flagged target": flagged_clip, "flagged output": clean_clip}
        )
        assert results["flagged target"]["status"] == "failed"
        assert results["flagged target"]["error"]["type"] == "content-policy-violation"
        assert results["flagged target"]["error"]["detail"].startswith("target video ")
        assert results["flagged output"]["status"] == "failed"
        assert results["flagged output"]["error"]["detail"].startswith("output ")
        # how many frames were checked, never the score
        assert re.search(
            r"\(\d+ of \d+ sampled frames\)$", results["flagged output"]["error"]["detail"]
        )
        for body in results.values():
            assert outputs_stored(h, body["id"]) == 0
        refused = {e.target: e.details["refused"] for e in audit_events(h)}
        assert refused == {
            f"job:{results['flagged target']['id']}": "target video",
            f"job:{results['flagged output']['id']}": "output",
        }


@pytest.mark.usefixtures("standin")
async def test_the_issues_clip_is_refused_on_input_and_output(
    make_client: Any, tmp_path: Path
) -> None:
    """Issue 26: 3 s at 30 fps whose frames 0, 30 and 60 are clean and the other 87 flagged
    (one frame a second at fixed positions saw only the clean ones). As the target: refused
    before the job runs. Clean, with a face on the 87 frames only, under face_debugger's
    opaque mask: the output alone carries them, and it is refused with nothing stored."""
    face = cv2.resize(cv2.imread(str(FACES / "woman_a_frontal_blue_wall_02.jpg")), (320, 240))
    grey = np.full_like(face, 128)
    gaps = {0, 30, 60}
    flagged_clip, output_clip = tmp_path / "flagged.mp4", tmp_path / "output.mp4"
    write_clip(
        flagged_clip,
        [grey if i in gaps else with_marker(face) for i in range(90)],
        steady_times(90),
    )
    write_clip(output_clip, [grey if i in gaps else face for i in range(90)], steady_times(90))
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("timed", **DEBUG_TENANT_POLICY)
        headers = h.headers("timed")
        results = await run_video_jobs(
            h, headers, {"target video": flagged_clip, "output": output_clip}
        )
        for name, body in results.items():
            assert body["status"] == "failed", body
            assert body["error"]["type"] == "content-policy-violation"
            assert body["error"]["detail"].startswith(f"{name} was refused"), body
            assert outputs_stored(h, body["id"]) == 0
            result = await h.client.get(f"/v1/jobs/{body['id']}/result", headers=headers)
            assert result.status_code == 422
            assert is_problem(result)
        refused = {e.target: e.details["refused"] for e in audit_events(h)}
        assert refused == {f"job:{body['id']}": name for name, body in results.items()}


@pytest.mark.usefixtures("standin")
async def test_a_tenants_own_classifier_does_not_replace_the_shared_one(
    make_client: Any, tmp_path: Path
) -> None:
    lenient = tmp_path / "lenient.onnx"
    lenient.write_bytes(standin_classifier(margin=1e9))  # scores everything 0
    ModelStore(tmp_path / "models").add(
        "open_nsfw", "v99", {"model": lenient}, kind="nsfw_classifier", licence="x", tenant="sneaky"
    )
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("sneaky", allow_custom_models=True, **DEBUG_TENANT_POLICY)
        headers = h.headers("sneaky")
        response = await submit(h.client, headers, photo(), [marked(photo())], options(SWAP))
        body = await wait_terminal(h.client, headers, response.json()["id"])
        assert body["status"] == "failed", body
        assert body["error"]["type"] == "content-policy-violation"


async def run_batch(h: Any, headers: dict[str, str], source: bytes, targets: list[bytes]) -> Any:
    files = [("source", ("s.jpg", source, "image/jpeg"))]
    files += [("target", (f"t{i}.jpg", data, "image/jpeg")) for i, data in enumerate(targets)]
    response = await h.client.post("/v1/batches", headers=headers, files=files, data=options(SWAP))
    assert response.status_code == 202, response.text
    return await wait_batch(h.client, headers, response.json()["id"])


@pytest.mark.usefixtures("standin")
async def test_a_batch_moderates_its_shared_source_once(
    make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its items reuse the decision made for the first of them (an allowed source and a
    refused one alike), and each item's audit names the decision it used; another tenant
    sending the same bytes gets a decision of its own."""
    assessed: list[str] = []  # what each classifier run checked
    assess = Moderator.assess

    def counted(moderator: Moderator, what: str, frames: Any, policy: Any) -> Any:
        assessed.append(what)
        return assess(moderator, what, frames, policy)

    monkeypatch.setattr(Moderator, "assess", counted)
    source = photo("woman_a_selfie_frontal_01.jpg")
    targets = [photo(name) for name in ("man_frontal_glasses.jpg", "woman_astronaut_frontal.jpg")]
    targets += [photo("man_frontal_beard_closeup.jpg"), photo("elderly_woman_glasses_frontal.jpg")]
    async with make_client(services=[workers_service], workers=2) as h:
        h.create_tenant("modded", **DEBUG_TENANT_POLICY)
        h.create_tenant("other", **DEBUG_TENANT_POLICY)
        batch = await run_batch(h, h.headers("modded"), source, targets)
        assert batch["counts"]["succeeded"] == 4, batch
        jobs = [f"job:{item['job_id']}" for item in batch["items"]]
        events = {e.target: e for e in audit_events(h)}
        used = {job: events[job].details["decisions"]["source image 1"] for job in jobs}
        assert len({u["decision"] for u in used.values()}) == 1  # one decision for the batch
        (made_for,) = {u["made_for"] for u in used.values()}
        assert made_for in jobs  # made for one of the items, reused by the others
        for job in jobs:
            assert events[job].action == "moderation.allowed"
            assert events[job].details["allowed"] == ["source image 1", "target image", "output"]
        # the source once; each target and each output
        assert sorted(assessed) == sorted(["source image 1"] + ["target image", "output"] * 4)

        other = await run_batch(h, h.headers("other"), source, targets[:1])
        assert other["counts"]["succeeded"] == 1, other
        theirs = audit_events(h)[-1].details["decisions"]["source image 1"]
        assert theirs["made_for"] == f"job:{other['items'][0]['job_id']}"
        assert theirs["decision"] not in {u["decision"] for u in used.values()}
        assert assessed.count("source image 1") == 2

        # A refused source: every item fails naming it, on one classifier run.
        refused = await run_batch(h, h.headers("modded"), marked(source), targets[:3])
        assert refused["counts"]["failed"] == 3, refused
        for item in refused["items"]:
            assert item["error"]["type"] == "content-policy-violation"
            assert item["error"]["detail"] == "source image 1 was refused by content moderation"
        events = {e.target: e for e in audit_events(h)}
        jobs = [f"job:{item['job_id']}" for item in refused["items"]]
        assert {events[job].action for job in jobs} == {"moderation.refused"}
        assert {events[job].details["refused"] for job in jobs} == {"source image 1"}
        used = {job: events[job].details["decisions"]["source image 1"] for job in jobs}
        assert len({u["decision"] for u in used.values()}) == 1
        assert assessed.count("source image 1") == 3

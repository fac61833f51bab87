"""The issue's demonstration: one person's face is the source of 50 jobs over two tenants,
20 more jobs are of other people. A takedown from one reported job finds all 50 and none of
the 20 (dlib's descriptor on the real photos of ../shared/data/faces, each job's source a
different resize and re-encoding), removes them, leaves no copy in storage, the jobs answer
410 naming the case, and the same face re-encoded at JPEG 70 is refused as a source.

The jobs' rows and objects are written directly (70 real swaps would take minutes); the
matching, the removal and the refusal run for real through the HTTP routes."""

from __future__ import annotations

import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from tests.conftest import MakeClient
from tests.takedown.takedownkit import add_job

from facegate.database import session_scope
from facegate.jobs.runtime import tenant_store_for
from facegate.observability.audit.chain import verify_chain
from facegate.observability.audit.repository import AuditRepository
from facegate.provenance.keys import create_keys
from facegate.takedown.service import open_case

FACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "faces"
PERSON = [
    "woman_a_selfie_frontal_01.jpg",
    "woman_a_frontal_blue_wall_02.jpg",
    "woman_a_fullbody_small_face_03.jpg",
]
OTHERS = [
    "man_frontal_glasses.jpg",
    "man_frontal_beard_closeup.jpg",
    "woman_b_frontal_dark_background.jpg",
    "woman_astronaut_frontal.jpg",
    "elderly_woman_glasses_frontal.jpg",
    "woman_angled_looking_up.jpg",
    "small_face_man_on_stage.jpg",
]


def variant(name: str, index: int) -> bytes:
    """The photo resized (60-100 %) and re-encoded (JPEG 75-95): distinct bytes each time."""
    image = cv2.imread(str(FACES / name))
    scale = 0.6 + 0.4 * ((index * 7) % 11) / 10
    resized = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    ok, encoded = cv2.imencode(".jpg", resized, [cv2.IMWRITE_JPEG_QUALITY, 75 + index % 21])
    assert ok
    return encoded.tobytes()


def jpeg70(name: str) -> bytes:
    ok, encoded = cv2.imencode(
        ".jpg", cv2.imread(str(FACES / name)), [cv2.IMWRITE_JPEG_QUALITY, 70]
    )
    assert ok
    return np.asarray(encoded).tobytes()


@pytest.mark.slow
@pytest.mark.skipif(not FACES.is_dir(), reason="needs ../shared/data/faces")
async def test_one_takedown_finds_and_removes_every_job_of_the_face(
    make_client: MakeClient, tmp_path: Path
) -> None:
    create_keys(tmp_path / "provenance")
    async with make_client(provenance_dir=tmp_path / "provenance") as h:
        admin = h.headers("platform", ["admin"])
        alpha = h.headers("alpha", ["jobs:read", "jobs:write", "tenant:admin"])
        beta = h.headers("beta", ["jobs:read", "jobs:write"])
        store = tenant_store_for(h.state.settings)
        person: list[tuple[str, object]] = []
        others: list[tuple[str, object]] = []
        with session_scope(h.state.session_factory) as session:
            for i in range(50):
                tenant = "alpha" if i % 2 == 0 else "beta"
                source = variant(PERSON[i % 3], i)
                person.append((tenant, add_job(session, store, tenant, source=source)))
            for i in range(20):
                tenant = "alpha" if i % 2 == 0 else "beta"
                source = variant(OTHERS[i % len(OTHERS)], i)
                others.append((tenant, add_job(session, store, tenant, source=source)))
            reported_tenant, reported_job = person[0]
            case = open_case(
                session, "system:reports", tenant_id=reported_tenant, job_id=reported_job
            )
            case_id = case.id

        started, cpu = time.perf_counter(), time.process_time()
        matched = await h.client.post(
            f"/v1/takedown/cases/{case_id}/match", data={"platform": "true"}, headers=admin
        )
        assert matched.status_code == 200, matched.text
        found = matched.json()
        removed = await h.client.post(f"/v1/takedown/cases/{case_id}/remove", headers=admin)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert removed.status_code == 200, removed.text
        jobs = {(m["tenant_id"], m["id"]) for m in found["matches"] if m["kind"] == "job"}
        assert jobs == {(t, str(j)) for t, j in person}
        assert max(m["distance"] for m in found["matches"]) < 0.6
        outcome = removed.json()
        print(
            f"\ntakedown: {len(jobs)} of 50 jobs found (0 of 20 others), "
            f"{found['scan']['sources_compared']} sources described in "
            f"{found['scan']['seconds']:.1f} s, removed in {outcome['seconds']:.2f} s; "
            f"match to removal {elapsed:.1f} s wall, {cpu:.1f} s CPU; "
            f"copies left: {outcome['copies_left']}"
        )
        # The work is within the minute; the wall time is the machine's (a shared VM at load
        # 20 took 5 minutes for the same CPU seconds): printed here, measured in
        # benchmarks/takedown_bench.py.
        assert cpu <= 60
        assert outcome["status"] == "removed"
        assert outcome["copies_left"] == 0
        for tenant, job in person:
            assert store.store.list(f"tenants/{tenant}/inputs/{job}/") == []
            assert store.store.list(f"tenants/{tenant}/outputs/{job}/") == []
        for tenant, job in others:
            assert len(store.store.list(f"tenants/{tenant}/inputs/{job}/")) == 2
        gone = await h.client.get(f"/v1/jobs/{person[2][1]}", headers=alpha)
        assert gone.status_code == 410
        assert gone.json()["case_id"] == case_id
        result = await h.client.get(f"/v1/jobs/{person[1][1]}/result", headers=beta)
        assert result.status_code == 410
        assert (await h.client.get(f"/v1/jobs/{others[0][1]}", headers=alpha)).status_code == 200
        # Alpha's admin sees the case (its own tenant's); beta's key does not.
        seen = await h.client.get(f"/v1/takedown/cases/{case_id}", headers=alpha)
        assert seen.status_code == 200
        assert seen.json()["removed_at"] is not None

        # The same face, re-encoded at JPEG 70, is refused as a source in both tenants
        # (a platform case); another person's face is not.
        target = (FACES / "man_frontal_glasses.jpg").read_bytes()
        for headers in (alpha, beta):
            refused = await h.client.post(
                "/v1/jobs",
                files={"source": ("a.jpg", jpeg70(PERSON[1])), "target": ("t.jpg", target)},
                headers=headers,
            )
            assert refused.status_code == 451, refused.text
            assert refused.json()["case_id"] == case_id
        allowed = await h.client.post(
            "/v1/jobs",
            files={"source": ("b.jpg", jpeg70(OTHERS[2])), "target": ("t.jpg", target)},
            headers=alpha,
        )
        assert allowed.status_code == 202, allowed.text
        with session_scope(h.state.session_factory, read_only=True) as session:
            repository = AuditRepository(session)
            assert verify_chain(repository.scan(), repository.head()).ok

"""A job (``POST /v1/jobs``) and a batch (``POST /v1/batches``) take their inputs the same
way (``api/submission.py``): the same refusal, word for word, for an upload over the
tenant's ``max_input_bytes`` (source or target), a template with options of its own or
with uploaded sources beside its faces, both an upload and a saved face, or options the
plan excludes, with nothing stored; and a template's saved face becomes the stored source
of a job and of a batch's item alike."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from sqlalchemy import select
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, count_jobs, count_objects, is_problem, photo

from facegate.database import session_scope
from facegate.storage.tables import StoredObject

pytestmark = pytest.mark.timeout(300)

LIMIT = 40_000  # the tenant's max_input_bytes: photo() fits, a 1600-pixel photo does not
DEBUG = json.dumps({"processors": ["face_debugger"]})


def files(target: bytes, sources: list[bytes]) -> list[tuple[str, tuple[str, bytes, str]]]:
    parts = [("source", (f"s{i}.jpg", data, "image/jpeg")) for i, data in enumerate(sources)]
    return [*parts, ("target", ("t.jpg", target, "image/jpeg"))]


async def both_routes(
    h: Any, headers: dict[str, str], target: bytes, sources: list[bytes], data: dict[str, Any]
) -> tuple[Any, Any]:
    as_job = await h.client.post(
        "/v1/jobs", headers=headers, files=files(target, sources), data=data
    )
    as_batch = await h.client.post(
        "/v1/batches", headers=headers, files=files(target, sources), data=data
    )
    return as_job, as_batch


def source_size(h: Any, job_id: str) -> int:
    with session_scope(h.state.session_factory) as session:
        size: int = session.scalars(
            select(StoredObject.size_bytes).where(
                StoredObject.job_id == uuid.UUID(job_id), StoredObject.name.startswith("source-0")
            )
        ).one()
    return size


async def test_jobs_and_batches_take_their_inputs_alike(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY, max_input_bytes=LIMIT)
        director = h.headers("studio", ("director",))
        small, large = photo(), photo(width=1600)
        assert len(small) < LIMIT < len(large)
        saved = await h.client.post(
            "/v1/faces/library",
            headers=director,
            files={"image": ("f.jpg", photo("woman_a_selfie_frontal_01.jpg"), "image/jpeg")},
            data={"name": "Lead"},
        )
        assert saved.status_code == 201, saved.text
        made = await h.client.post(
            "/v1/templates",
            headers=director,
            json={"name": "lead", "options": {"processors": ["face_swapper"]}, "faces": ["Lead"]},
        )
        assert made.status_code == 201, made.text
        objects = count_objects(h.state)

        refused: list[tuple[str, bytes, list[bytes], dict[str, Any], int]] = [
            ("source over the limit", small, [large], {"options": DEBUG}, 413),
            ("target over the limit", large, [small], {"options": DEBUG}, 413),
            ("template and options", small, [], {"template": "lead", "options": DEBUG}, 422),
            ("template faces and a source", small, [small], {"template": "lead"}, 422),
            (
                "upload and saved face",
                small,
                [small],
                {"options": DEBUG, "source_face_id": saved.json()["id"]},
                422,
            ),
            (
                "outside the plan",
                small,
                [small],
                {"options": json.dumps({"processors": ["frame_enhancer"]})},
                403,
            ),
        ]
        for case, target, sources, data, status in refused:
            as_job, as_batch = await both_routes(h, director, target, sources, data)
            assert as_job.status_code == status, (case, as_job.text)
            assert as_batch.status_code == status, (case, as_batch.text)
            assert is_problem(as_job)
            assert is_problem(as_batch)
            for key in ("type", "detail", "limit"):
                assert as_job.json().get(key) == as_batch.json().get(key), (case, key)
        assert count_jobs(h.state) == 0
        assert count_objects(h.state) == objects

        # The template's saved face is the stored source of a job and of a batch's item.
        as_job, as_batch = await both_routes(h, director, small, [], {"template": "lead"})
        assert as_job.status_code == 202, as_job.text
        assert as_batch.status_code == 202, as_batch.text
        item_job = as_batch.json()["items"][0]["job_id"]
        assert source_size(h, as_job.json()["id"]) == source_size(h, item_job)
        assert source_size(h, item_job) != len(small)

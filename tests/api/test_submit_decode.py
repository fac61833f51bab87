"""A single job's target image is decoded beside its submission's write (issue 28's 5 ms
submit; ``facegate.jobs.decoding``): the route reads the header, the full decode runs on the
decode threads while the input is written and the rows inserted, and the commit waits for
it. The guarantees stay, on SQLite and PostgreSQL: a damaged image is refused at submission
(422 naming the damage) and leaves no job, no ledger row and no file; an image over the
pixel limit is refused from its header; a large image is decoded before the transaction
opens, so the transaction never waits long for a decode."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image
from tests.api.jobhelpers import (
    DEBUG_TENANT_POLICY,
    count_jobs,
    count_objects,
    is_problem,
    load_badmedia,
    photo,
    stored_files,
    submit,
)

from dbkit import create_schema, drop_schema, postgres_hint, postgres_url
from facegate.engine.image import ImageInfo, ImageLimits
from facegate.jobs import decoding

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Settings overrides choosing the database (none: the test's SQLite file)."""
    if request.param == "sqlite":
        yield {}
        return
    base = postgres_url()
    if base is None:
        pytest.skip(postgres_hint("decode beside the submission"))
    schema, url = create_schema(base, "decode")
    try:
        yield {"database_url": url}
    finally:
        drop_schema(base, schema)


@pytest.fixture
def decoded_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that ran each full decode of the decode threads."""
    threads: list[str] = []
    verify = decoding.verify_image

    def recorded(data: bytes, limits: ImageLimits) -> ImageInfo:
        threads.append(threading.current_thread().name)
        return verify(data, limits)

    monkeypatch.setattr(decoding, "verify_image", recorded)
    return threads


def noisy_jpeg(min_bytes: int) -> bytes:
    """A JPEG of random pixels of at least ``min_bytes`` (noise does not compress)."""
    side = 256
    while True:
        pixels = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
        out = io.BytesIO()
        pixels.save(out, "JPEG", quality=95)
        if out.tell() >= min_bytes:
            return out.getvalue()
        side *= 2


async def test_a_sound_target_is_decoded_beside_the_write(
    make_client: Any, database: dict[str, Any], decoded_on: list[str]
) -> None:
    async with make_client(**database) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        response = await submit(h.client, h.headers("acme"), photo())
        assert response.status_code == 202, response.text
        assert count_jobs(h.state) == 1
        assert count_objects(h.state) == 1
    assert len(decoded_on) == 1
    assert decoded_on[0].startswith("upload-decode")


async def test_a_damaged_target_is_refused_and_leaves_nothing(
    make_client: Any, database: dict[str, Any], decoded_on: list[str]
) -> None:
    damaged = load_badmedia().damaged_png_data()  # header sound, pixel data broken
    async with make_client(**database) as h:
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = h.headers("acme")
        response = await submit(h.client, headers, damaged.data)
        assert response.status_code == 422, response.text
        assert is_problem(response)
        assert response.json()["type"].endswith("corrupt-media")
        assert "damaged" in response.json()["detail"]
        assert count_jobs(h.state) == 0
        assert count_objects(h.state) == 0
        assert stored_files(h.state) == []
        # The refusal left nothing behind that would hold the next submission up.
        assert (await submit(h.client, headers, photo())).status_code == 202
    assert decoded_on[0].startswith("upload-decode")  # the damage was found beside the write


async def test_a_target_over_the_pixel_limit_is_refused_from_its_header(
    make_client: Any, decoded_on: list[str]
) -> None:
    async with make_client() as h:
        h.create_tenant("acme", max_input_pixels=100 * 100, **DEBUG_TENANT_POLICY)
        response = await submit(h.client, h.headers("acme"), photo(width=160))
        assert response.status_code == 413, response.text
        assert "max_pixels" in response.json()["detail"]
        assert count_objects(h.state) == 0
    assert decoded_on == []  # refused before any decode started


async def test_a_large_target_is_decoded_before_the_transaction(
    make_client: Any, decoded_on: list[str]
) -> None:
    large = noisy_jpeg(decoding.DECODE_BESIDE_MAX_BYTES + 1)
    async with make_client() as h:
        h.create_tenant("acme", max_input_bytes=len(large) * 2, **DEBUG_TENANT_POLICY)
        response = await submit(h.client, h.headers("acme"), large)
        assert response.status_code == 202, response.text
    assert decoded_on == []  # decoded on the request's own thread (verify_image inline)


def test_a_forked_process_makes_its_own_decode_threads() -> None:
    info = decoding.decode_beside(photo(), ImageLimits()).result(timeout=30)
    assert info.format == "jpeg"
    pid = os.fork()
    if pid == 0:  # the child: the parent's threads are not here
        code = 0
        try:
            decoding.decode_beside(photo(), ImageLimits()).result(timeout=30)
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

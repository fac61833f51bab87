"""``POST /v1/faces`` (the console's face picker) and the console's page and assets."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image
from tests.testdata import FACES

from facegate.api.console import CONTENT_SECURITY_POLICY


def _jpeg(name: str, width: int = 320) -> bytes:
    image = Image.open(FACES / name).convert("RGB")
    out = io.BytesIO()
    image.resize((width, round(image.height * width / image.width))).save(out, "JPEG")
    return out.getvalue()


async def test_faces_are_found_in_selector_order(make_client: Any) -> None:
    async with make_client() as h:
        headers = h.headers("acme")
        response = await h.client.post(
            "/v1/faces",
            headers=headers,
            files={"image": ("g.jpg", _jpeg("group_3_men_expressions_glasses.jpg", 500))},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["width"], body["height"]) == (500, 375)
        assert body["order"] == "large-small"
        faces = body["faces"]
        assert [face["index"] for face in faces] == list(range(len(faces)))
        assert len(faces) >= 2
        areas = [(f["box"][2] - f["box"][0]) * (f["box"][3] - f["box"][1]) for f in faces]
        assert areas == sorted(areas, reverse=True)
        for face in faces:
            x1, y1, x2, y2 = face["box"]
            assert 0 <= x1 < x2 <= 500
            assert 0 <= y1 < y2 <= 375

        left_first = await h.client.post(
            "/v1/faces",
            headers=headers,
            files={"image": ("g.jpg", _jpeg("group_3_men_expressions_glasses.jpg", 500))},
            data={"order": "left-right"},
        )
        lefts = [face["box"][0] for face in left_first.json()["faces"]]
        assert lefts == sorted(lefts)


async def test_faces_of_a_faceless_image_is_an_empty_list(make_client: Any) -> None:
    async with make_client() as h:
        response = await h.client.post(
            "/v1/faces",
            headers=h.headers("acme"),
            files={"image": ("c.jpg", _jpeg("no_face_landscape_mountains.jpg"))},
        )
        assert response.status_code == 200
        assert response.json()["faces"] == []


async def test_faces_applies_the_tenants_limits_and_scope(make_client: Any) -> None:
    async with make_client() as h:
        h.create_tenant("tiny", max_input_bytes=1000)
        too_big = await h.client.post(
            "/v1/faces",
            headers=h.headers("tiny"),
            files={"image": ("a.jpg", _jpeg("woman_astronaut_frontal.jpg"))},
        )
        assert too_big.status_code == 413
        assert too_big.headers["content-type"].startswith("application/problem+json")
        not_an_image = await h.client.post(
            "/v1/faces",
            headers=h.headers("acme"),
            files={"image": ("a.jpg", b"plain text, not an image")},
        )
        assert not_an_image.status_code == 415
        read_only = await h.client.post(
            "/v1/faces",
            headers=h.headers("acme", scopes=["jobs:read"]),
            files={"image": ("a.jpg", _jpeg("woman_astronaut_frontal.jpg"))},
        )
        assert read_only.status_code == 403


async def test_console_page_and_assets_are_served(make_client: Any) -> None:
    async with make_client() as h:
        page = await h.client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert '<script type="module" src="/assets/main.js">' in page.text
        script = await h.client.get("/assets/main.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]
        missing = await h.client.get("/assets/nope.js")
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("application/problem+json")
        escape = await h.client.get("/assets/../console.py")
        assert escape.status_code == 404
        # The API keeps answering problem+json for unknown routes.
        unknown = await h.client.get("/v1/nope")
        assert unknown.headers["content-type"].startswith("application/problem+json")

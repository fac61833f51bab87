"""The face library in the console, in a real browser: a face turned further than the
built-in swapper takes (a profile) carries a visible warning with its angle and the limit,
both read from the API; a frontal face carries none. The director and an editor (who reads
the library) see the same."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from consolehelpers import no_horizontal_scroll, screenshot, sign_in
from playwright.sync_api import expect
from tests.testdata import FACES

from facegate.engine.swap.mesh_warp import Tuning

pytestmark = [pytest.mark.browser]
TENANT = "library-web"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def keys(server: Any) -> dict[str, str]:
    """A tenant with a director's and an editor's key, and a profile and a frontal face
    saved through the API."""
    admin = auth(server.admin_key)
    created = httpx.post(
        f"{server.url}/v1/admin/tenants", headers=admin, json={"id": TENANT}, timeout=30
    )
    assert created.status_code == 201, created.text
    tokens = {}
    for role in ("director", "editor"):
        key = httpx.post(
            f"{server.url}/v1/admin/tenants/{TENANT}/keys",
            headers=admin,
            json={"name": role, "scopes": [role]},
            timeout=30,
        )
        assert key.status_code == 201, key.text
        tokens[role] = key.json()["token"]
    for name, photo in (
        ("Profile", "man_profile_grayscale_occluded.png"),
        ("Frontal", "woman_astronaut_frontal.jpg"),
    ):
        face = httpx.post(
            f"{server.url}/v1/faces/library",
            headers=auth(tokens["director"]),
            files={"image": (photo, (FACES / photo).read_bytes())},
            data={"name": name},
            timeout=60,
        )
        assert face.status_code == 201, face.text
    return tokens


@pytest.mark.parametrize("role", ["director", "editor"])
def test_a_face_the_builtin_swapper_refuses_shows_a_warning(
    server: Any, keys: dict[str, str], page: Any, role: str
) -> None:
    faces = {f["name"]: f for f in server.get("/v1/faces/library", keys[role]).json()}
    assert faces["Profile"]["builtin_swap_usable"] is False
    assert faces["Frontal"]["builtin_swap_usable"] is True
    limit = Tuning().max_source_turn

    sign_in(page, server.url, keys[role])
    page.click('#nav a[data-view="library"]')
    profile = page.locator('#face-list .saved-face[data-name="Profile"]')
    frontal = page.locator('#face-list .saved-face[data-name="Frontal"]')
    expect(frontal).to_be_visible()
    warning = profile.locator(".face-warning")
    expect(warning).to_be_visible()
    expect(warning).to_contain_text(
        f"Turned {round(faces['Profile']['turned'])}° — the built-in swapper needs a face "
        f"turned at most {limit:g}°"
    )
    expect(frontal.locator(".face-warning")).to_have_count(0)
    if role == "director":
        screenshot(page, "library-turned-warning")
        page.set_viewport_size({"width": 390, "height": 800})  # a phone: the warning wraps
        expect(warning).to_be_visible()
        assert no_horizontal_scroll(page)

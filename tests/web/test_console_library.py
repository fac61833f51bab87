"""The face library in the console, in a real browser: a face turned further than the
built-in swapper takes (a profile) carries a visible warning with its angle and the limit,
both read from the API; a frontal face carries none. The director and an editor (who reads
the library) see the same, in the library view and in the face pickers of the batch and
template forms (where the face stays selectable: an installed ONNX swapper may take it)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from consolehelpers import auth, no_horizontal_scroll, screenshot, sign_in, tenant_with_role_keys
from playwright.sync_api import expect
from tests.testdata import FACES

from facegate.engine.swap.mesh_warp import Tuning

pytestmark = [pytest.mark.browser]
TENANT = "library-web"


@pytest.fixture(scope="module")
def keys(server: Any) -> dict[str, str]:
    """A tenant with a director's and an editor's key, and a profile and a frontal face
    saved through the API."""
    tokens = tenant_with_role_keys(server, TENANT, ("director", "editor"))
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


def expected_warning(server: Any, key: str) -> str:
    """The warning the profile face should carry, from its angle in the API and the limit."""
    faces = {f["name"]: f for f in server.get("/v1/faces/library", key).json()}
    assert faces["Profile"]["builtin_swap_usable"] is False
    assert faces["Frontal"]["builtin_swap_usable"] is True
    return (
        f"Turned {round(faces['Profile']['turned'])}° — the built-in swapper needs a face "
        f"turned at most {Tuning().max_source_turn:g}°"
    )


@pytest.mark.parametrize("role", ["director", "editor"])
def test_a_face_the_builtin_swapper_refuses_shows_a_warning(
    server: Any, keys: dict[str, str], page: Any, role: str
) -> None:
    text = expected_warning(server, keys[role])

    sign_in(page, server.url, keys[role])
    page.click('#nav a[data-view="library"]')
    profile = page.locator('#face-list .saved-face[data-name="Profile"]')
    frontal = page.locator('#face-list .saved-face[data-name="Frontal"]')
    expect(frontal).to_be_visible()
    warning = profile.locator(".face-warning")
    expect(warning).to_be_visible()
    expect(warning).to_contain_text(text)
    expect(frontal.locator(".face-warning")).to_have_count(0)
    if role == "director":
        screenshot(page, "library-turned-warning")
        page.set_viewport_size({"width": 390, "height": 800})  # a phone: the warning wraps
        expect(warning).to_be_visible()
        assert no_horizontal_scroll(page)


@pytest.mark.parametrize("role", ["director", "editor"])
def test_the_face_pickers_warn_on_a_face_the_builtin_swapper_refuses(
    server: Any, keys: dict[str, str], page: Any, role: str
) -> None:
    text = expected_warning(server, keys[role])

    sign_in(page, server.url, keys[role])
    page.click('#nav a[data-view="batches"]')
    pickers = {
        "#batch-faces": 'input[name="batch-face"][data-name="{}"]',
        "#template-faces": 'input[name="template-face"][value="{}"]',
    }
    for picker, choice in pickers.items():
        profile = page.locator(f"{picker} {choice.format('Profile')}")
        frontal = page.locator(f"{picker} {choice.format('Frontal')}")
        expect(frontal).to_be_visible()
        # One warning in the picker, visible, and it describes the profile's checkbox only.
        warning = page.locator(f"{picker} .face-warning")
        expect(warning).to_have_count(1)
        expect(warning).to_be_visible()
        expect(warning).to_contain_text(text)
        expect(profile).to_have_accessible_description(re.compile(re.escape(text)))
        expect(frontal).not_to_have_attribute("aria-describedby", re.compile(".*"))
        # Still a choice: an operator's installed swapper may accept the face.
        expect(profile).to_be_enabled()
        profile.check()
        expect(profile).to_be_checked()
    if role == "director":
        screenshot(page, "pickers-turned-warning")
        page.set_viewport_size({"width": 390, "height": 800})  # a phone: the warnings wrap
        expect(page.locator("#template-faces .face-warning")).to_be_visible()
        assert no_horizontal_scroll(page)

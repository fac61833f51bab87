"""The console's Live view in a real browser: Chromium's fake camera plays a Y4M clip made
from a test photo at test time; a director and an editor start a stream with a saved face
and the swapped video shown beside the camera carries the saved face's identity (the
project's recogniser on a screenshot), with fps and latency on screen; Stop ends it. A
viewer has no Live view (and the API refuses it a stream: tests/streams)."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import httpx
import numpy as np
import pytest
from consolehelpers import (
    CHROMIUM,
    CHROMIUM_ARGS,
    auth,
    screenshot,
    sign_in,
    tenant_with_role_keys,
)
from consoleserver import serving_console
from playwright.sync_api import expect
from tests.streams.turnkit import TurnServer, local_turn, require_turnserver
from tests.testdata import FACES

from facegate.engine.faces import FaceAnalyser
from facegate.engine.identity import (
    SAME_PERSON_DISTANCE,
    FaceRecogniser,
    available,
    identity_distance,
)
from facegate.engine.types import Frame
from facegate.streams.loopback import camera_frame

pytestmark = [pytest.mark.browser]
TENANT = "live-web"
SOURCE = FACES / "man_frontal_beard_closeup.jpg"
CAMERA = FACES / "woman_b_frontal_dark_background.jpg"


def write_y4m(path: Path, picture: Frame, frames: int = 30, fps: int = 15) -> None:
    """A Y4M clip (4:2:0) of ``picture``: what Chromium's fake camera plays, in a loop."""
    height, width = picture.shape[:2]
    yuv = cv2.cvtColor(picture, cv2.COLOR_BGR2YUV_I420).tobytes()
    with path.open("wb") as out:
        out.write(f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for _ in range(frames):
            out.write(b"FRAME\n" + yuv)


@pytest.fixture(scope="module")
def keys(server: Any) -> dict[str, str]:
    return live_tenant(server)


def live_tenant(server: Any) -> dict[str, str]:
    """The live tenant with a key per role and a saved face: role -> token."""
    tokens = tenant_with_role_keys(
        server,
        TENANT,
        ("director", "editor", "viewer"),
        policy={"max_concurrent_streams": 1, "requests_per_minute": 100_000},
    )
    face = httpx.post(
        f"{server.url}/v1/faces/library",
        headers=auth(tokens["director"]),
        files={"image": (SOURCE.name, SOURCE.read_bytes())},
        data={"name": "Bearded"},
        timeout=60,
    )
    assert face.status_code == 201, face.text
    return tokens


@pytest.fixture(scope="module")
def turn_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, TurnServer]]:
    """A console whose streams may only relay through a coturn on loopback."""
    require_turnserver()
    folder = tmp_path_factory.mktemp("turn")
    secret = secrets.token_urlsafe(24)
    with local_turn(secret, folder) as turn:
        env = {
            "FACEGATE_STREAM_ICE_URLS": json.dumps([turn.url]),
            "FACEGATE_STREAM_TURN_SECRET": secret,
            "FACEGATE_STREAM_ICE_RELAY_ONLY": "true",
        }
        with serving_console(folder, env) as running:
            yield running, turn


@pytest.fixture(scope="module")
def camera_browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Chromium whose camera is a clip of the camera photo (permission granted)."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's Chromium at /usr/bin/chromium (scripts/system-packages)")
    clip = tmp_path_factory.mktemp("camera") / "camera.y4m"
    write_y4m(clip, camera_frame(cv2.imread(str(CAMERA))))
    from playwright.sync_api import sync_playwright

    args = [
        *CHROMIUM_ARGS,
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        f"--use-file-for-fake-video-capture={clip}",
    ]
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=args)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def live_page(camera_browser: Any) -> Iterator[Any]:
    context = camera_browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"JavaScript errors in the page: {errors}"


def largest_face_descriptor(
    recogniser: FaceRecogniser, analyser: FaceAnalyser, frame: Frame
) -> Any:
    faces = analyser.analyse(frame)
    assert faces, "no face in the picture"
    face = max(faces, key=lambda f: (f.box[2] - f.box[0]) * (f.box[3] - f.box[1]))
    return recogniser.describe(frame, face)


@pytest.mark.skipif(not available(), reason="the dlib recogniser's models are not installed")
@pytest.mark.parametrize("role", ["director", "editor"])
def test_a_live_stream_shows_the_swapped_camera(
    server: Any, keys: dict[str, str], live_page: Any, role: str, tmp_path: Path
) -> None:
    page = live_page
    sign_in(page, server.url, keys[role])
    page.click('#nav a[data-view="live"]')
    expect(page.locator("#live-face option")).to_have_count(1)
    page.click("#live-start")
    expect(page.locator("#live-stats")).to_contain_text("fps", timeout=60_000)
    expect(page.locator("#live-stats")).to_contain_text("latency")
    page.wait_for_function(
        "() => { const v = document.querySelector('#live-swapped');"
        " return v.videoWidth > 0 && v.currentTime > 1; }",
        timeout=60_000,
    )
    shot = tmp_path / "swapped.png"
    page.locator("#live-swapped").screenshot(path=str(shot))
    if role == "director":
        screenshot(page, "live-view")
    swapped = cv2.imread(str(shot))
    analyser = FaceAnalyser()
    try:
        recogniser = FaceRecogniser()
        seen = largest_face_descriptor(recogniser, analyser, swapped)
        d_source = identity_distance(
            seen, largest_face_descriptor(recogniser, analyser, cv2.imread(str(SOURCE)))
        )
        d_camera = identity_distance(
            seen, largest_face_descriptor(recogniser, analyser, cv2.imread(str(CAMERA)))
        )
    finally:
        analyser.close()
    assert d_source < SAME_PERSON_DISTANCE < d_camera, (d_source, d_camera)

    page.click("#live-stop")
    expect(page.locator("#live-stats")).to_contain_text("ended")
    streams = server.get("/v1/streams", keys[role]).json()["items"]
    assert streams
    assert streams[0]["state"] == "ended"
    assert np.isfinite(streams[0]["seconds"])


def show_swapped(page: Any, url: str, key: str, tmp_path: Path) -> Frame:
    """Sign in, start a stream on the Live view, wait for the swapped video: a screenshot
    of it."""
    sign_in(page, url, key)
    page.click('#nav a[data-view="live"]')
    expect(page.locator("#live-face option")).to_have_count(1)
    page.click("#live-start")
    expect(page.locator("#live-stats")).to_contain_text("fps", timeout=60_000)
    page.wait_for_function(
        "() => { const v = document.querySelector('#live-swapped');"
        " return v.videoWidth > 0 && v.currentTime > 1; }",
        timeout=60_000,
    )
    shot = tmp_path / "swapped.png"
    page.locator("#live-swapped").screenshot(path=str(shot))
    image = cv2.imread(str(shot))
    assert image is not None
    return np.asarray(image, dtype=np.uint8)


@pytest.mark.skipif(not available(), reason="the dlib recogniser's models are not installed")
def test_the_live_view_relays_through_the_turn_server_it_is_given(
    turn_server: tuple[Any, TurnServer], live_page: Any, tmp_path: Path
) -> None:
    """The server offers relay candidates only: the browser reaches it through coturn with
    the TURN credential of its tenant from GET /v1/streams/ice, or not at all."""
    server, turn = turn_server
    tokens = live_tenant(server)
    swapped = show_swapped(live_page, server.url, tokens["director"], tmp_path)
    log = turn.log.read_text(errors="replace")
    allocated = {
        user
        for user in re.findall(r"user <([^>]*)>: incoming packet ALLOCATE processed, success", log)
    }
    assert any(user.endswith(f":{TENANT}") for user in allocated), allocated  # the browser's
    assert any(":stream-" in user for user in allocated), allocated  # the server's side
    analyser = FaceAnalyser()
    try:
        recogniser = FaceRecogniser()
        seen = largest_face_descriptor(recogniser, analyser, swapped)
        source = largest_face_descriptor(recogniser, analyser, cv2.imread(str(SOURCE)))
        assert identity_distance(seen, source) < SAME_PERSON_DISTANCE
    finally:
        analyser.close()
    live_page.click("#live-stop")
    expect(live_page.locator("#live-stats")).to_contain_text("ended")


def test_a_viewer_has_no_live_view(server: Any, keys: dict[str, str], live_page: Any) -> None:
    page = live_page
    sign_in(page, server.url, keys["viewer"])
    expect(page.locator('#nav a[data-view="live"]')).to_be_hidden()
    page.goto(server.url + "/#/live")
    expect(page.locator("#view-live")).to_be_hidden()

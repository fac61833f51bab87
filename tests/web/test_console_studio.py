"""The studio in the console, in a real browser: a director builds the face library (save,
rename, delete) and runs a batch with a saved face, following its progress (the page polls
the batch) into a gallery of the results and a ZIP of them, then saves a job template and
runs a batch with it, and one that places each saved face on a chosen target face; each
role sees what it may do — an editor submits batches and manages templates but has no
library controls, a viewer sees batches, templates and results without any submit or delete
control, billing sees usage only."""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from consolehelpers import (
    auth,
    no_horizontal_scroll,
    screenshot,
    sign_in,
    sign_out,
    tenant_with_role_keys,
)
from PIL import Image
from playwright.sync_api import expect
from tests.testdata import FACES

pytestmark = [pytest.mark.browser, pytest.mark.slow]
TENANT = "studio-web"
ROLES = ("director", "editor", "viewer", "billing")
BATCH_TIMEOUT_MS = 180_000
TARGETS = [
    "man_frontal_glasses.jpg",
    "woman_astronaut_frontal.jpg",
    "man_frontal_beard_closeup.jpg",
]


def small_photo(name: str, folder: Path, width: int = 240) -> Path:
    """A downscaled copy of a test photo in the test's own temporary folder (quick jobs)."""
    image = Image.open(FACES / name).convert("RGB")
    path = folder / f"small-{name}"
    image.resize((width, round(image.height * width / image.width))).save(path, "JPEG")
    return path


@pytest.fixture(scope="module")
def keys(server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A tenant with a key per role, one saved face and one finished batch (through the API)."""
    policy = {"allowed_processors": ["face_swapper", "face_debugger"], "max_concurrent_jobs": 2}
    tokens = tenant_with_role_keys(server, TENANT, ROLES, policy)
    folder = tmp_path_factory.mktemp("studio-photos")
    source = small_photo("woman_a_selfie_frontal_01.jpg", folder).read_bytes()
    face = httpx.post(
        f"{server.url}/v1/faces/library",
        headers=auth(tokens["director"]),
        files={"image": ("f.jpg", source)},
        data={"name": "Casting reference"},
        timeout=60,
    )
    assert face.status_code == 201, face.text
    batch = httpx.post(
        f"{server.url}/v1/batches",
        headers=auth(tokens["editor"]),
        files=[("target", ("t.jpg", small_photo(TARGETS[0], folder).read_bytes()))],
        data={"source_face_id": face.json()["id"], "options": '{"processors": ["face_swapper"]}'},
        timeout=60,
    )
    assert batch.status_code == 202, batch.text
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        state = server.get(f"/v1/batches/{batch.json()['id']}", tokens["viewer"]).json()
        if state["status"] == "completed":
            break
        time.sleep(0.3)
    assert state["counts"]["succeeded"] == 1, state
    return tokens


def visible_views(page: Any) -> list[str]:
    views: list[str] = page.eval_on_selector_all(
        "#nav a", "links => links.filter(a => !a.hidden).map(a => a.dataset.view)"
    )
    return views


def test_director_builds_the_library_and_runs_a_batch(
    server: Any, keys: dict[str, str], page: Any, tmp_path: Path
) -> None:
    director = keys["director"]
    polls: list[str] = []
    page.on(
        "request",
        lambda request: (
            polls.append(request.url)
            if "/v1/batches/" in request.url and request.method == "GET"
            else None
        ),
    )
    sign_in(page, server.url, director)
    assert visible_views(page) == ["swap", "jobs", "batches", "library"]

    page.click('#nav a[data-view="library"]')
    expect(page.locator("#face-save-card")).to_be_visible()
    expect(page.locator("#face-list .saved-face")).to_have_count(1)  # the fixture's
    for name, photo in (("Lead", "woman_b_frontal_dark_background.jpg"), ("Double", TARGETS[1])):
        page.set_input_files("#face-image", str(small_photo(photo, tmp_path)))
        page.fill("#face-name", name)
        page.fill("#face-labels", "s01, hero")
        page.click("#save-face")
        expect(page.locator(f'#face-list .saved-face[data-name="{name}"]')).to_be_visible(
            timeout=60_000
        )
    expect(page.locator("#face-list .saved-face")).to_have_count(3)
    expect(page.locator('.saved-face[data-name="Lead"] .face-labels')).to_have_text("hero, s01")

    page.get_by_role("button", name="Rename Double").click()
    page.fill(".face-rename-input", "Stand-in")
    page.click(".face-rename-save")
    expect(page.locator('.saved-face[data-name="Stand-in"]')).to_be_visible()
    delete = page.get_by_role("button", name="Delete Stand-in")
    delete.click()
    expect(delete).to_have_text("Confirm: delete Stand-in")
    delete.click()
    expect(page.locator('.saved-face[data-name="Stand-in"]')).to_have_count(0)
    saved = server.get("/v1/faces/library", director).json()
    assert sorted(face["name"] for face in saved) == ["Casting reference", "Lead"]
    screenshot(page, "studio-library")

    page.click('#nav a[data-view="batches"]')
    expect(page.locator("#batch-form-card")).to_be_visible()
    page.check('input[name="batch-face"][data-name="Lead"]')
    page.set_input_files("#batch-targets", [str(small_photo(n, tmp_path)) for n in TARGETS])
    page.click("#submit-batch")
    detail = page.locator("#batch-detail")
    expect(detail).to_be_visible()
    expect(detail).to_have_attribute("data-status", "completed", timeout=BATCH_TIMEOUT_MS)
    expect(page.locator("#batch-counts")).to_contain_text("3 of 3 done · 3 succeeded")
    assert page.eval_on_selector("#batch-progress", "bar => bar.value") == 1
    gallery = page.locator("#batch-gallery img.result-media")
    expect(gallery).to_have_count(3)
    for index in range(3):  # decoded images, not broken links
        expect(gallery.nth(index)).to_have_js_property("complete", True)
        assert gallery.nth(index).evaluate("img => img.naturalWidth") > 0
    batch_id = polls[-1].split("/v1/batches/")[1].split("/")[0]
    assert sum(url.endswith(f"/v1/batches/{batch_id}") for url in polls) >= 2  # it polled
    # Each tile shows the verdict of each swapped face (the quality report of its job).
    items = server.get(f"/v1/batches/{batch_id}", director).json()["items"]
    verdicts = [face["verdict"] for item in items for face in item["quality"] or []]
    assert verdicts  # the swaps were measured
    badges = page.locator("#batch-gallery .quality-face")
    expect(badges).to_have_count(len(verdicts))
    for verdict in set(verdicts):
        expect(
            page.locator(f'#batch-gallery .quality-face[data-verdict="{verdict}"]')
        ).to_have_count(verdicts.count(verdict))
    screenshot(page, "studio-batch")

    with page.expect_download() as download_info:
        page.click("#download-batch")
    archive = Path(download_info.value.path()).read_bytes()
    api_archive = httpx.get(
        f"{server.url}/v1/batches/{batch_id}/archive", headers=auth(director), timeout=60
    )
    with (
        zipfile.ZipFile(io.BytesIO(archive)) as got,
        zipfile.ZipFile(io.BytesIO(api_archive.content)) as expected,
    ):
        assert len(got.namelist()) == 3
        assert got.namelist() == expected.namelist()
    batch = server.get(f"/v1/batches/{batch_id}", director).json()
    assert batch["counts"]["succeeded"] == 3

    # A job template saved in the page brings its options and its face to the next batch.
    page.fill("#template-name", "Lead swap")
    page.check('input[name="template-face"][value="Lead"]')
    page.select_option("#template-mode", "many")
    page.fill("#template-blend", "80")
    page.click("#save-template")
    row = page.locator('#template-list .template[data-name="Lead swap"]')
    expect(row.locator(".template-summary")).to_have_text(
        "face_swapper · blend 80 % · every face · faces: Lead"
    )
    [template] = server.get("/v1/templates", director).json()
    assert template["faces"] == ["Lead"]
    assert template["options"]["processor_options"]["face_swapper"]["blend"] == 0.8
    page.select_option("#batch-template", label="Lead swap (Lead)")
    page.set_input_files("#batch-targets", [str(small_photo(TARGETS[0], tmp_path))])
    page.click("#submit-batch")
    expect(page.locator("#batch-counts")).to_contain_text(
        "1 of 1 done · 1 succeeded", timeout=BATCH_TIMEOUT_MS
    )
    expect(page.locator("#batch-gallery img.result-media")).to_have_count(1)
    uses = httpx.get(
        f"{server.url}/v1/audit",
        headers=auth(server.admin_key),
        params={"tenant": TENANT, "action": "template.use"},
        timeout=30,
    ).json()["events"]
    assert [event["target"] for event in uses] == [f"template:{template['id']}"]


def test_each_role_sees_only_what_it_may_do(server: Any, keys: dict[str, str], page: Any) -> None:
    # An editor: batches with saved faces, the library to read, no library controls.
    sign_in(page, server.url, keys["editor"])
    assert visible_views(page) == ["swap", "jobs", "batches", "library"]
    page.click('#nav a[data-view="library"]')
    expect(page.locator('#face-list .saved-face[data-name="Casting reference"]')).to_be_visible()
    expect(page.locator("#face-save-card")).to_be_hidden()
    expect(page.locator(".face-delete")).to_have_count(0)
    expect(page.locator(".face-rename")).to_have_count(0)
    page.click('#nav a[data-view="batches"]')
    expect(page.locator("#batch-form-card")).to_be_visible()
    expect(page.locator('input[name="batch-face"][data-name="Casting reference"]')).to_be_visible()
    # ... and manages job templates: saves one, deletes it in two steps.
    expect(page.locator("#template-form")).to_be_visible()
    page.fill("#template-name", "Editor's pick")
    page.click("#save-template")
    expect(page.locator('.template[data-name="Editor\'s pick"]')).to_be_visible()
    expect(page.locator("#batch-template")).to_contain_text("Editor's pick")
    delete = page.get_by_role("button", name="Delete template Editor's pick")
    delete.click()
    delete.click()
    expect(page.locator('.template[data-name="Editor\'s pick"]')).to_have_count(0)
    assert "Editor's pick" not in [
        t["name"] for t in server.get("/v1/templates", keys["editor"]).json()
    ]
    sign_out(page)

    # A viewer: jobs and batches with their results; no submit, no delete, no library.
    sign_in(page, server.url, keys["viewer"])
    assert visible_views(page) == ["jobs", "batches"]
    expect(page.locator("#view-jobs")).to_be_visible()
    page.click('#nav a[data-view="batches"]')
    expect(page.locator("#batch-form-card")).to_be_hidden()
    expect(page.locator("#submit-batch")).to_be_hidden()
    expect(page.locator("#templates-card")).to_be_visible()  # templates to read only
    expect(page.locator("#template-form")).to_be_hidden()
    expect(page.locator(".template-delete")).to_have_count(0)
    page.locator("#batch-list .batch button").last.click()
    expect(page.locator("#batch-detail")).to_have_attribute("data-status", "completed")
    expect(page.locator("#batch-gallery img.result-media")).to_have_count(1)
    expect(page.locator("#download-batch")).to_be_enabled()
    expect(page.locator(".face-delete")).to_have_count(0)
    screenshot(page, "studio-viewer")
    for forbidden in ("library", "swap", "usage"):
        page.goto(f"{server.url}/#/{forbidden}")
        expect(page.locator("#view-jobs")).to_be_visible()
        expect(page.locator(f"#view-{forbidden}")).to_be_hidden()
    sign_out(page)

    # Billing: usage only.
    sign_in(page, server.url, keys["billing"])
    assert visible_views(page) == ["usage"]
    expect(page.locator("#view-usage")).to_be_visible()
    expect(page.locator("#usage-card svg")).to_be_visible()
    expect(page.locator("#usage-card .error-text")).to_have_count(0)
    for forbidden in ("batches", "jobs", "library"):
        page.goto(f"{server.url}/#/{forbidden}")
        expect(page.locator("#view-usage")).to_be_visible()
        expect(page.locator(f"#view-{forbidden}")).to_be_hidden()
    screenshot(page, "studio-billing")


def test_studio_views_fit_a_phone(server: Any, keys: dict[str, str], browser: Any) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        sign_in(page, server.url, keys["director"])
        for view in ("batches", "library"):
            page.goto(f"{server.url}/#/{view}")
            expect(page.locator(f"#view-{view}")).to_be_visible()
            if view == "batches":  # with a batch's gallery open
                page.locator("#batch-list .batch button").first.click()
                expect(page.locator("#batch-detail")).to_have_attribute("data-status", "completed")
            page.wait_for_load_state("networkidle")
            assert no_horizontal_scroll(page), view
            screenshot(page, f"phone-{view}")
    finally:
        context.close()


def test_a_template_places_saved_faces_on_target_faces(
    server: Any, keys: dict[str, str], page: Any, tmp_path: Path
) -> None:
    director = keys["director"]
    for name, photo in (
        ("Left lead", "woman_b_frontal_dark_background.jpg"),
        ("Right lead", "woman_astronaut_frontal.jpg"),
    ):
        saved = httpx.post(
            f"{server.url}/v1/faces/library",
            headers=auth(director),
            files={"image": ("f.jpg", small_photo(photo, tmp_path).read_bytes())},
            data={"name": name},
            timeout=60,
        )
        assert saved.status_code == 201, saved.text
    sign_in(page, server.url, director)
    page.click('#nav a[data-view="batches"]')
    expect(page.locator("#template-form")).to_be_visible()
    place = 'input[name="template-target"][data-name="{}"]'
    expect(page.locator(place.format("Left lead"))).to_be_disabled()  # until it is ticked
    page.fill("#template-name", "Crosswise")
    page.check('input[name="template-face"][value="Left lead"]')
    page.check('input[name="template-face"][value="Right lead"]')
    error = page.locator("#template-error")

    # Checked in the page (a place counts from 1), then by the API (one source per face).
    page.fill(place.format("Right lead"), "0")
    page.click("#save-template")
    expect(error).to_have_text("The target face for Right lead is a whole number from 1 to 256.")
    page.fill(place.format("Left lead"), "1")
    page.fill(place.format("Right lead"), "1")
    page.click("#save-template")
    expect(error).to_contain_text("one target face two sources")
    assert "Crosswise" not in [t["name"] for t in server.get("/v1/templates", director).json()]

    page.fill(place.format("Right lead"), "2")
    page.click("#save-template")
    row = page.locator('#template-list .template[data-name="Crosswise"]')
    expect(row.locator(".template-summary")).to_have_text(
        "face_swapper · blend 100 % · the mapped faces · "
        "faces: Right lead → target face 2, Left lead → target face 1"
    )
    expect(error).to_be_hidden()
    expect(page.locator(place.format("Right lead"))).to_be_disabled()  # the form is reset
    [template] = [
        t for t in server.get("/v1/templates", director).json() if t["name"] == "Crosswise"
    ]
    assert template["faces"] == ["Right lead", "Left lead"]  # the library's order
    assert template["mapping"] == {"Right lead": 1, "Left lead": 0}
    assert template["options"]["selector"]["mapping"] == [[0, 1], [1, 0]]

    # A batch with it: the two-face target gets both, the one-face target has no face 2.
    page.select_option("#batch-template", label="Crosswise (Right lead, Left lead)")
    targets = [
        small_photo("group_2_women_laughing_angled.jpg", tmp_path, width=360),
        small_photo(TARGETS[0], tmp_path),
    ]
    page.set_input_files("#batch-targets", [str(path) for path in targets])
    page.click("#submit-batch")
    detail = page.locator("#batch-detail")
    expect(detail).to_have_attribute("data-status", "completed", timeout=BATCH_TIMEOUT_MS)
    expect(page.locator("#batch-counts")).to_contain_text("2 of 2 done · 1 succeeded · 1 failed")
    expect(page.locator("#item-0")).to_have_attribute("data-status", "succeeded")
    expect(page.locator("#item-1 .error-text")).to_contain_text("target index 1 is out of range")
    screenshot(page, "studio-template-mapping")

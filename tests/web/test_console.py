"""The console in a real browser: sign-in, a face swap watched to 100 %, the result and its
download, a wrong key, and an admin creating a tenant whose key sees none of demo's jobs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from consolehelpers import (
    SOURCE_PHOTO,
    TARGET_PHOTO,
    drop_file,
    no_horizontal_scroll,
    screenshot,
    sign_in,
    sign_out,
)
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]
JOB_TIMEOUT_MS = 180_000


def test_tenant_swaps_two_faces_and_downloads_the_result(server: Any, page: Any) -> None:
    page.goto(server.url + "/")
    expect(page.locator("#signin-title")).to_be_visible()
    screenshot(page, "signin")
    sign_in(page, server.url, server.demo_key)
    expect(page.locator("#identity-text")).to_contain_text("demo")
    # The key is in session storage only, never in the address.
    assert page.evaluate("sessionStorage.getItem('facegate.apiKey')") == server.demo_key
    assert server.demo_key not in page.url

    # Options come from /v1/capabilities: the demo plan allows the face swapper.
    expect(page.locator('#processor-list input[value="face_swapper"]')).to_be_checked()
    page.set_input_files("#source-input", str(SOURCE_PHOTO))
    drop_file(page, "#drop-target", TARGET_PHOTO, "image/jpeg")
    expect(page.locator("#source-previews img")).to_have_count(1)
    expect(page.locator("#target-preview img")).to_have_count(1)
    # The face picker shows the faces found in each image; map source face 1 onto target 1.
    expect(page.locator("#picker-sources canvas")).to_have_count(1, timeout=60_000)
    expect(page.locator("#picker-targets select")).to_have_count(1)
    page.select_option("#map-target-0", "0")
    screenshot(page, "swap")

    page.click("#submit-job")
    expect(page.locator("#view-jobs")).to_be_visible()
    row = page.locator(".job").first
    expect(row).to_have_attribute("data-status", "succeeded", timeout=JOB_TIMEOUT_MS)
    expect(row.locator(".percent")).to_have_text("100 %")
    job_id = (row.get_attribute("id") or "").removeprefix("job-")

    # The quality report of the swapped face (docs/identity.md), as the API gives it.
    quality = server.get(f"/v1/jobs/{job_id}", server.demo_key).json()["result"]["quality"]
    expect(row.locator(".job-quality li")).to_have_count(len(quality))
    first = row.locator(".job-quality li").first
    expect(first).to_have_attribute("data-verdict", quality[0]["verdict"])
    expect(first).to_contain_text(f"{quality[0]['d_source']:.2f} from the source")
    # The files' names are on the job, and its result opens by itself when it is done.
    expect(row.locator(".job-inputs")).to_have_text(f"{SOURCE_PHOTO.name} → {TARGET_PHOTO.name}")
    expect(row.locator("img.job-thumb")).to_have_count(1)
    expect(page.locator("#download-result")).to_be_visible()
    expect(page.locator("#compare-slider")).to_be_visible()  # before/after of an image
    page.fill("#compare-slider", "30")
    screenshot(page, "jobs-result")
    with page.expect_download() as download_info:
        page.click("#download-result")
    downloaded = Path(download_info.value.path()).read_bytes()
    api_result = server.get(f"/v1/jobs/{job_id}/result", server.demo_key)
    assert api_result.status_code == 200
    assert downloaded == api_result.content
    spec = server.get(f"/v1/jobs/{job_id}", server.demo_key).json()
    assert spec["status"] == "succeeded"

    page.click('#nav a[data-view="usage"]')
    expect(page.locator("#usage-card")).not_to_be_empty()
    expect(page.locator("#usage-card .error-text")).to_have_count(0)
    # the plan beside the usage (the demo plan's limits from /v1/capabilities)
    expect(page.locator("#plan-facts")).to_contain_text("4k")
    expect(page.locator("#plan-facts")).to_contain_text("Jobs at once")
    screenshot(page, "usage")


def test_phone_width_has_no_horizontal_scroll(server: Any, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = context.new_page()
        page.goto(server.url + "/")
        assert no_horizontal_scroll(page)
        sign_in(page, server.url, server.demo_key)
        for view in ("swap", "jobs", "usage"):
            page.goto(f"{server.url}/#/{view}")
            expect(page.locator(f"#view-{view}")).to_be_visible()
            page.wait_for_load_state("networkidle")
            assert no_horizontal_scroll(page), view
            screenshot(page, f"phone-{view}")
    finally:
        context.close()


def test_wrong_key_shows_a_clear_message(server: Any, page: Any) -> None:
    page.goto(server.url + "/")
    page.fill("#api-key", "fg_not_a_real_key")
    page.keyboard.press("Enter")
    error = page.locator("#signin-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("That API key was not accepted")
    assert "{" not in (error.text_content() or "")  # the problem's detail, not raw JSON
    assert page.evaluate("sessionStorage.getItem('facegate.apiKey')") is None
    expect(page.locator("#nav")).to_be_hidden()
    screenshot(page, "signin-wrong-key")


def _ensure_demo_job(server: Any) -> None:
    if server.get("/v1/jobs", server.demo_key).json()["items"]:
        return
    files = [
        ("source", ("s.jpg", SOURCE_PHOTO.read_bytes(), "image/jpeg")),
        ("target", ("t.jpg", TARGET_PHOTO.read_bytes(), "image/jpeg")),
    ]
    response = httpx.post(
        server.url + "/v1/jobs",
        headers={"Authorization": f"Bearer {server.demo_key}"},
        files=files,
        data={"options": json.dumps({"processors": ["face_swapper"]})},
        timeout=30,
    )
    assert response.status_code == 202, response.text


def test_admin_creates_a_tenant_whose_key_sees_only_its_own_jobs(server: Any, page: Any) -> None:
    _ensure_demo_job(server)
    missing: list[str] = []  # the page asked for something that is not there (was: favicon)
    page.on(
        "response",
        lambda response: missing.append(response.url) if response.status == 404 else None,
    )
    sign_in(page, server.url, server.admin_key)
    page.click('#nav a[data-view="admin"]')
    expect(page.locator("#tenant-table tbody tr").first).to_be_visible()

    page.fill("#tenant-id", "Not Valid")
    page.click("#tenant-form button[type=submit]")
    expect(page.locator("#tenant-error")).to_contain_text("lowercase")
    page.fill("#tenant-id", "acme")
    page.fill("#tenant-name", "Acme Studios")
    page.click("#tenant-form button[type=submit]")
    expect(page.locator("#tenant-detail-title")).to_have_text("Tenant acme")
    # A refusal by the server shows its problem+json detail, not raw JSON.
    page.fill("#tenant-id", "acme")
    page.click("#tenant-form button[type=submit]")
    expect(page.locator("#tenant-error")).to_contain_text("acme")
    assert "{" not in (page.locator("#tenant-error").text_content() or "")

    # Policy: an out-of-range value is refused in the page, a valid one is saved.
    page.fill("#policy-max_concurrent_jobs", "0")
    page.click("#policy-form button[type=submit]")
    expect(page.locator("#policy-error")).to_contain_text("Max Concurrent Jobs")
    page.fill("#policy-max_concurrent_jobs", "3")
    page.click("#policy-form button[type=submit]")
    expect(page.locator("#policy-error")).to_be_hidden()
    expect(page.locator("#policy-max_concurrent_jobs")).to_have_value("3")
    policy = server.get("/v1/admin/tenants/acme/policy", server.admin_key).json()
    assert policy["max_concurrent_jobs"] == 3

    page.fill("#key-name", "studio laptop")
    page.click("#key-form button[type=submit]")
    secret = page.locator("#new-secret-value")
    expect(secret).to_have_text(re.compile(r"^fg_\S+$"))
    new_key = secret.text_content() or ""
    expect(page.locator("#key-table tbody tr")).to_have_count(1)
    # The audit log lists what was just done, with its verification state.
    expect(page.locator("#audit-table")).to_contain_text("key.create")
    expect(page.locator("#audit-table")).to_contain_text("tenant.create")
    # GET /v1/audit/verify answers (it was a 404 the page worked around).
    expect(page.locator("#audit-state")).to_contain_text("Chain verified")
    assert missing == []
    expect(page.locator("#admin-usage svg")).to_be_visible()
    screenshot(page, "admin")

    sign_out(page)
    sign_in(page, server.url, new_key)
    expect(page.locator("#identity-text")).to_contain_text("acme")
    page.click('#nav a[data-view="jobs"]')
    expect(page.locator("#jobs-empty")).to_be_visible()
    expect(page.locator(".job")).to_have_count(0)
    expect(page.locator('#nav a[data-view="admin"]')).to_be_hidden()
    assert server.get("/v1/jobs", server.demo_key).json()["items"]  # demo does have jobs

    # Revoke it as the admin: the key no longer signs in.
    sign_out(page)
    sign_in(page, server.url, server.admin_key)
    page.click('#nav a[data-view="admin"]')
    page.get_by_role("button", name="Manage acme").click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke key studio laptop").click()
    expect(page.locator("#key-table .badge")).to_have_text("revoked")
    sign_out(page)
    page.fill("#api-key", new_key)
    page.click("#signin-form button[type=submit]")
    expect(page.locator("#signin-error")).to_contain_text("not accepted")

"""The console under a ``require_consent`` plan, in a real browser: the sensitive processors
(as the processors declare them, through /v1/capabilities) carry an "audited" badge, the swap
form asks for a consent attestation and refuses to submit without it, and the submitted
job shows the attestation recorded for its source."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from consolehelpers import SOURCE_PHOTO, TARGET_PHOTO, drop_file, sign_in
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def consent_tenant_key(server: Any) -> str:
    admin = {"Authorization": f"Bearer {server.admin_key}"}
    policy = {"allowed_processors": ["face_swapper", "face_debugger"], "require_consent": True}
    created = httpx.post(
        server.url + "/v1/admin/tenants",
        headers=admin,
        json={"id": "consenting", "policy": policy},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    key = httpx.post(
        server.url + "/v1/admin/tenants/consenting/keys",
        headers=admin,
        json={"name": "browser", "scopes": ["jobs:write", "jobs:read"]},
        timeout=30,
    )
    assert key.status_code == 201, key.text
    token: str = key.json()["token"]
    return token


def test_consent_is_asked_recorded_and_shown(server: Any, page: Any) -> None:
    key = consent_tenant_key(server)
    sign_in(page, server.url, key)
    swapper = page.locator("#processor-list label", has_text="Face swap")
    expect(swapper.locator(".badge.sensitive")).to_have_text("audited")
    debugger = page.locator("#processor-list label", has_text="Face debugger")
    expect(debugger.locator(".badge.sensitive")).to_have_count(0)
    expect(page.locator("#consent-field")).to_be_visible()
    page.uncheck('#processor-list input[value="face_swapper"]')
    expect(page.locator("#consent-field")).to_be_hidden()
    page.check('#processor-list input[value="face_swapper"]')

    page.set_input_files("#source-input", str(SOURCE_PHOTO))
    drop_file(page, "#drop-target", TARGET_PHOTO, "image/jpeg")
    expect(page.locator("#target-preview img")).to_have_count(1)
    page.click("#submit-job")
    expect(page.locator("#swap-error")).to_contain_text("requires consent")

    page.fill("#consent-by", "Jane Roe, casting")
    page.fill("#consent-version", "2026-11")
    page.check("#consent-confirm")
    page.click("#submit-job")
    expect(page.locator("#view-jobs")).to_be_visible()
    row = page.locator(".job").first
    expect(row.locator(".job-consent")).to_contain_text("attested by Jane Roe, casting")
    expect(row.locator(".job-consent")).to_contain_text("statement 2026-11")
    job_id = (row.get_attribute("id") or "").removeprefix("job-")
    job = server.get(f"/v1/jobs/{job_id}", key).json()
    assert job["consent"][0]["attested_by"] == "Jane Roe, casting"

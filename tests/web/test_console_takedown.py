"""The admin console's takedown cases in a real browser: a report of a real result opens a
case with its clock; "Find across tenants" lists the job made from that face with its
distance; "Remove" removes it (the job then answers 410) and stops the clock."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from consolehelpers import SOURCE_PHOTO, TARGET_PHOTO, sign_in
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _finished_job(server: Any) -> str:
    files = [
        ("source", ("s.jpg", SOURCE_PHOTO.read_bytes(), "image/jpeg")),
        ("target", ("t.jpg", TARGET_PHOTO.read_bytes(), "image/jpeg")),
    ]
    response = httpx.post(
        server.url + "/v1/jobs",
        headers={"Authorization": f"Bearer {server.demo_key}"},
        files=files,
        timeout=30,
    )
    assert response.status_code == 202, response.text
    job_id = str(response.json()["id"])
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status = server.get(f"/v1/jobs/{job_id}", server.demo_key).json()["status"]
        if status in ("succeeded", "failed", "cancelled"):
            assert status == "succeeded"
            return job_id
        time.sleep(0.5)
    raise AssertionError("the job did not finish")


def test_admin_finds_and_removes_a_reported_face(server: Any, page: Any) -> None:
    job_id = _finished_job(server)
    result = server.get(f"/v1/jobs/{job_id}/result", server.demo_key).content
    reported = httpx.post(
        server.url + "/v1/reports",
        files=[("file", ("found.jpg", result, "image/jpeg"))],
        data={"message": "a deepfake of me"},
        timeout=60,
    )
    assert reported.status_code == 202, reported.text

    sign_in(page, server.url, server.admin_key)
    page.click('#nav a[data-view="admin"]')
    row = page.locator("#takedown-table tbody tr").first
    expect(row).to_contain_text("open")
    expect(row).to_contain_text("of 48 h")
    row.get_by_role("button", name="Find across tenants").click()
    expect(page.locator("#takedown-table .takedown-matches").first).to_contain_text("1 jobs")
    page.locator("#takedown-table tbody tr").first.get_by_role("button", name="Remove").click()
    expect(page.locator("#takedown-table tbody tr").first).to_contain_text("removed after")
    assert server.get(f"/v1/jobs/{job_id}", server.demo_key).status_code == 410
    expect(page.locator("#audit-table")).to_contain_text("takedown.remove")

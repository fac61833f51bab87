"""Plain helpers for the console's browser tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect
from tests.testdata import FACES

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

SCREENSHOTS = ROOT / "test-output" / "console"
# Test photos only (SOURCES.md: the Grace Hopper portrait's licence is not verified): the
# copies of these screenshots in docs/ have the result preview pixelated.
SOURCE_PHOTO = FACES / "woman_astronaut_frontal.jpg"
TARGET_PHOTO = FACES / "elderly_woman_glasses_frontal.jpg"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def tenant_with_role_keys(
    server: Any, tenant: str, roles: tuple[str, ...], policy: dict[str, Any] | None = None
) -> dict[str, str]:
    """A new tenant (through the admin API, with ``policy`` when given) and a key per role,
    named after it: role → token."""
    admin = auth(server.admin_key)
    body: dict[str, Any] = {"id": tenant} if policy is None else {"id": tenant, "policy": policy}
    created = httpx.post(f"{server.url}/v1/admin/tenants", headers=admin, json=body, timeout=30)
    assert created.status_code == 201, created.text
    tokens = {}
    for role in roles:
        key = httpx.post(
            f"{server.url}/v1/admin/tenants/{tenant}/keys",
            headers=admin,
            json={"name": role, "scopes": [role]},
            timeout=30,
        )
        assert key.status_code == 201, key.text
        tokens[role] = key.json()["token"]
    return tokens


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def sign_in(page: Any, url: str, key: str) -> None:
    page.goto(url + "/")
    page.fill("#api-key", key)
    page.click("#signin-form button[type=submit]")
    expect(page.locator("#identity")).to_be_visible()


def sign_out(page: Any) -> None:
    page.click("#sign-out")
    expect(page.locator("#view-signin")).to_be_visible()


def drop_file(page: Any, selector: str, path: Path, mime: str) -> None:
    """Drop a file on an element the way a person drags one from the desktop."""
    page.evaluate(
        """([selector, bytes, name, mime]) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([new Uint8Array(bytes)], name, {type: mime}));
            const zone = document.querySelector(selector);
            zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: transfer, bubbles: true}));
            zone.dispatchEvent(new DragEvent("drop", {dataTransfer: transfer, bubbles: true}));
        }""",
        [selector, list(path.read_bytes()), path.name, mime],
    )


def no_horizontal_scroll(page: Any) -> bool:
    width: int = page.evaluate("document.documentElement.scrollWidth")
    viewport: int = page.evaluate("window.innerWidth")
    return width <= viewport

"""Browser tests of the console: a real ``facegate serve`` in a subprocess (temp data dir,
free port) and Debian's Chromium driven by Playwright.

Run them with Chromium installed (``sudo scripts/system-packages``) or ``CI=true``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from consolehelpers import CHROMIUM, CHROMIUM_ARGS
from consoleserver import Server, serving_console


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving_console(tmp_path_factory.mktemp("console")) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI=true but /usr/bin/chromium is missing: scripts/system-packages installs it"
            )
        pytest.skip(
            "needs Debian's Chromium at /usr/bin/chromium: run `sudo scripts/system-packages` "
            "(or set CI=true), then `.venv/bin/python -m pytest tests/web`"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    context.set_default_timeout(30_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"JavaScript errors in the page: {errors}"

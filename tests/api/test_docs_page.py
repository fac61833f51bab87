"""``/docs`` is served from this installation: no CDN, a CSP naming only this origin and
the page's own script by hash."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any


async def test_docs_load_nothing_from_elsewhere(make_client: Any) -> None:
    async with make_client() as h:
        page = await h.client.get("/docs")
        assert page.status_code == 200
        html = page.text
        assert "http://" not in html
        assert "https://" not in html  # no CDN, no external favicon
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy
        (script,) = re.findall(r"<script>(.*?)</script>", html, re.S)
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
        for asset in re.findall(r'(?:src|href)="(/docs/assets/[^"]+)"', html):
            assert (await h.client.get(asset)).status_code == 200, asset
        assert (await h.client.get("/redoc")).status_code == 404

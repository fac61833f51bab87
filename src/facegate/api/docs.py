"""``/docs``: Swagger UI served by this installation (the ``swagger-ui-bundle`` package),
never from a CDN, under a Content-Security-Policy that allows this origin and the page's
own initialising script (by its hash) only. ``/openapi.json`` is the document it shows."""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

ASSETS = "/docs/assets"
_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.S)

router = APIRouter(include_in_schema=False)


def content_security_policy(page: bytes) -> str:
    """Only this origin, plus each inline script of ``page`` by its sha256."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script).digest()).decode() + "'"
        for script in _INLINE_SCRIPT.findall(page)
    )
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' {hashes}",
            # Swagger UI sets style attributes from its scripts.
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    page = get_swagger_ui_html(
        openapi_url=request.app.openapi_url,
        title="facegate API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
    )
    body = bytes(page.body)
    headers = {
        "Content-Security-Policy": content_security_policy(body),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    return HTMLResponse(body, headers=headers)


def mount_docs_assets(app: FastAPI) -> None:
    """Serve Swagger UI's scripts and styles from the installed package."""
    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

"""The browser console: ``src/facegate/web`` served as static files.

``GET /`` answers the page (with a strict Content-Security-Policy: scripts, styles and
connections from this origin only, no inline code); its scripts and styles live under
``/assets``. The console is plain ES modules and CSS, so there is no build step.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        # Previews and results are shown from blob: URLs made in the page.
        "img-src 'self' blob: data:",
        "media-src 'self' blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
def console_page() -> FileResponse:
    return FileResponse(WEB_DIR / "index.html", media_type="text/html", headers=PAGE_HEADERS)


@router.get("/favicon.ico")
def favicon() -> FileResponse:
    """The page names its icon (``/assets/favicon.svg``); this answers clients that ask the
    conventional path anyway, instead of a 404 in every log."""
    return FileResponse(
        WEB_DIR / "assets" / "favicon.svg",
        media_type="image/svg+xml",
        headers={"Cache-Control": "max-age=86400"},
    )


def mount_console_assets(app: FastAPI) -> None:
    """Serve ``web/assets`` at ``/assets`` (a Mount, which APIRouter cannot carry)."""
    app.mount("/assets", StaticFiles(directory=WEB_DIR / "assets"), name="console-assets")

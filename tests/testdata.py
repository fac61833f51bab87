"""Where the shared test data lives: the face photos of ``../shared/data/faces`` (see their
SOURCES.md), found from this checkout's own location."""

from __future__ import annotations

from pathlib import Path

FACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "faces"

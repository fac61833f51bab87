"""The media type of each image and video format the service reads or writes."""

from __future__ import annotations

MEDIA_TYPES: dict[str, str] = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "bmp": "image/bmp",
    "tiff": "image/tiff",
    "mp4": "video/mp4",
    "webm": "video/webm",
}


def media_type(format_name: str) -> str:
    """The media type of ``format_name`` (``application/octet-stream`` when unknown)."""
    return MEDIA_TYPES.get(format_name, "application/octet-stream")

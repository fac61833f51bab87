"""Moderation of a face saved to the library, as a job's source would be: the tenant's
``moderation`` policy, the installation's shared ``open_nsfw`` (never a tenant's own) and
the jobs' threshold. A refused image is not saved: the request answers the job's
``content-policy-violation`` problem (422, naming ``library image``, never the score). Each
decision counts in ``facegate_moderation_decisions_total`` and is audited by
``system:moderation`` (``moderation.allowed`` on the saved face, in the transaction that
saves it; ``moderation.refused`` on ``face-library`` in a transaction of its own, since the
save fails)."""

from __future__ import annotations

import structlog
from sqlalchemy.orm import Session

from facegate.engine.errors import ContentPolicyViolation
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.moderation import ModerationPolicy, Moderator
from facegate.engine.types import Frame
from facegate.moderation_policy import JOB_MODERATION
from facegate.observability import metrics
from facegate.observability.audit import (
    MODERATION_ACTOR,
    MODERATION_ALLOWED,
    MODERATION_REFUSED,
    record_audit,
)

LIBRARY_IMAGE = "library image"
REFUSED_TARGET = "face-library"  # the audit target of a refusal: no face was saved
log = structlog.get_logger("facegate.moderation")


def moderate_library_image(
    tenant_id: str,
    enabled: bool,
    frame: Frame,
    hub: ModelHub,
    policy: ModerationPolicy = JOB_MODERATION,
) -> bool:
    """Check the image of a face about to be saved; whether it was checked (False: the
    tenant's moderation is off). Raises ``ContentPolicyViolation`` when it is refused."""
    if not (enabled and policy.check_inputs):
        metrics.moderation_decision(tenant_id, "disabled")
        return False
    result = Moderator(hub).assess(LIBRARY_IMAGE, [frame], policy)
    if result.blocked:
        metrics.moderation_decision(tenant_id, "refused")
        log.warning(
            "moderation.refused",
            tenant_id=tenant_id,
            checked=LIBRARY_IMAGE,
            score=round(result.max_score, 4),
            threshold=result.threshold,
            frames=1,
        )
        raise result.violation()
    metrics.moderation_decision(tenant_id, "allowed")
    return True


def audit_allowed(session: Session, tenant_id: str, face: str, image_sha256: str) -> None:
    record_audit(
        session,
        MODERATION_ACTOR,
        MODERATION_ALLOWED,
        face,
        {"allowed": [LIBRARY_IMAGE], "image_sha256": image_sha256},
        tenant_id=tenant_id,
    )


def audit_refused(
    session: Session, tenant_id: str, refused: ContentPolicyViolation, image_sha256: str
) -> None:
    record_audit(
        session,
        MODERATION_ACTOR,
        MODERATION_REFUSED,
        REFUSED_TARGET,
        {"refused": refused.what, "allowed": [], "image_sha256": image_sha256},
        tenant_id=tenant_id,
    )

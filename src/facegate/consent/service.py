"""The consent rule of a submission: when the tenant's policy has ``require_consent`` and
the job uses a sensitive processor (the processors' own declaration), every source image
must carry an attestation, and a job with no source image (a processor that alters the
target's own face, its age or expression) one for the person in its target;
attestations given are stored (append-only) with the attested input's sha256 and returned
for the job to reference, whether required or not. The worker checks the rule again when
it starts a job (:func:`check_job_consent`): a policy switched on after submission holds
for the jobs still queued."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from facegate.consent.repository import ConsentRepository
from facegate.consent.schemas import ConsentRef, parse_consent
from facegate.consent.tables import ConsentAttestation
from facegate.database import utcnow
from facegate.engine.processors.registry import sensitive_processors
from facegate.errors import InvalidInput

SOURCE_PREFIX = "source-"
TARGET = "target"


def consent_required(require_consent: bool, processors: Sequence[str]) -> list[str]:
    """The sensitive processors that make consent mandatory ([] when it is not)."""
    return sensitive_processors(processors) if require_consent else []


class ConsentService:
    """Records the attestations of one submission, in the caller's transaction."""

    def __init__(self, session: Session) -> None:
        self.repository = ConsentRepository(session)

    @staticmethod
    def check(
        raw: str | None, sources: int, require_consent: bool, processors: Sequence[str]
    ) -> None:
        """Refuse (422 ``consent-required`` / ``invalid-consent``) before anything is stored.
        With no source image the one attestation is the target's (see :func:`attested`)."""
        given = parse_consent(raw, sources or 1)
        needing = consent_required(require_consent, processors)
        if needing and not given:
            raise InvalidInput(
                f"this tenant's policy requires a consent attestation for each source image "
                f"of a job using {', '.join(needing)} (for the person in the target when the "
                'job has no source): send the consent field ({"attested_by", '
                '"statement_version", "attested_at"}, one per source)',
                code="consent-required",
                limit="require_consent",
            )

    @staticmethod
    def check_saved(
        raw: str | None, missing: Sequence[str], require_consent: bool, processors: Sequence[str]
    ) -> None:
        """The same rule for sources taken from the face library, which carry the consent
        record made when they were saved: no ``consent`` field, and every saved face used
        by a sensitive job needs one where the policy asks."""
        if raw is not None and raw.strip():
            raise InvalidInput(
                "saved faces carry the consent records made when they were saved: "
                "send no consent field with source_face_id",
                code="invalid-consent",
            )
        needing = consent_required(require_consent, processors)
        if needing and missing:
            raise InvalidInput(
                f"this tenant's policy requires a consent attestation for each source of a "
                f"job using {', '.join(needing)}; saved without one: {', '.join(missing)}",
                code="consent-required",
                limit="require_consent",
            )

    @staticmethod
    def attested(inputs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The ``(input name, sha256)`` pairs a job's consent field attests, of its inputs
        (sources first, the target last): the sources, or the target when there are none."""
        sources = [item for item in inputs if item[0].startswith(SOURCE_PREFIX)]
        return sources or [item for item in inputs if item[0] == TARGET][:1]

    def record(
        self, tenant_id: str, actor: str, raw: str | None, sources: Sequence[tuple[str, str]]
    ) -> list[ConsentRef]:
        """Store one attestation per ``(input name, sha256)`` source; the job's references."""
        given = parse_consent(raw, len(sources))
        if not given:
            return []
        now = utcnow()
        refs: list[ConsentRef] = []
        for (name, sha256), consent in zip(sources, given, strict=True):
            row = self.repository.add(
                ConsentAttestation(
                    tenant_id=tenant_id,
                    source_sha256=sha256,
                    attested_by=consent.attested_by,
                    statement_version=consent.statement_version,
                    attested_at=consent.attested_at or now,
                    recorded_by=actor[:200],
                    recorded_at=now,
                )
            )
            refs.append(
                ConsentRef(
                    source=name,
                    attestation_id=str(row.id),
                    source_sha256=sha256,
                    attested_by=row.attested_by,
                    statement_version=row.statement_version,
                    attested_at=row.attested_at,
                )
            )
        return refs


def check_job_consent(
    spec_processors: Sequence[str],
    inputs: Sequence[str],
    consent: Sequence[dict[str, object]] | None,
    require_consent: bool,
) -> None:
    """The rule again when a worker starts a job, under the tenant's policy of now: a job
    queued before ``require_consent`` was switched on fails ``consent-required`` when an
    input the rule covers (each source, or the target of a job without one) has no
    attestation."""
    needing = consent_required(require_consent, spec_processors)
    if not needing:
        return
    covered = {str(ref.get("source")) for ref in consent or []}
    sources = [name for name in inputs if name.startswith(SOURCE_PREFIX)]
    lacking = [name for name in sources or [TARGET] if name not in covered]
    if lacking:
        raise InvalidInput(
            f"this tenant's policy now requires a consent attestation for each source of a "
            f"job using {', '.join(needing)}; this job was queued without one for "
            f"{', '.join(lacking)}",
            code="consent-required",
            limit="require_consent",
        )

"""The consent rule of a submission: when the tenant's policy has ``require_consent`` and
the job uses a sensitive processor (the processors' own declaration), every source image
must carry an attestation; attestations given are stored (append-only) with the source's
sha256 and returned for the job to reference, whether required or not."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from facegate.consent.repository import ConsentRepository
from facegate.consent.schemas import ConsentRef, parse_consent
from facegate.consent.tables import ConsentAttestation
from facegate.database import utcnow
from facegate.engine.processors.registry import sensitive_processors
from facegate.errors import InvalidInput


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
        """Refuse (422 ``consent-required`` / ``invalid-consent``) before anything is stored."""
        given = parse_consent(raw, sources)
        needing = consent_required(require_consent, processors)
        if needing and sources and not given:
            raise InvalidInput(
                f"this tenant's policy requires a consent attestation for each source image "
                f"of a job using {', '.join(needing)}: send the consent field "
                '({"attested_by", "statement_version", "attested_at"}, one per source)',
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

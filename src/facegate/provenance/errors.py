"""Provenance failures, in the service's problem+json hierarchy."""

from __future__ import annotations

from facegate.api.errors import ProblemError


class ProvenanceUnavailable(ProblemError):
    """The installation cannot mark results (no signing key, a broken one, a failed
    signature): no result is stored unmarked, so the job fails with this reason."""

    status = 503
    type_slug = "provenance-unavailable"
    title = "Results cannot be marked"

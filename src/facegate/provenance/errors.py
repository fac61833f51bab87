"""Provenance failures, in the service's error vocabulary (``facegate.errors``)."""

from __future__ import annotations

from facegate.errors import Unavailable


class ProvenanceUnavailable(Unavailable):
    """The installation cannot mark results (no signing key, a broken one, a failed
    signature): no result is stored unmarked, so the job fails with this reason."""

    code = "provenance-unavailable"

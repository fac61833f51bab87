"""Consent attestations per source face: who attests that the person in a source image
agreed, under which statement version, and when; stored append-only with the source's
sha256 and referenced by the job that used it (policy ``require_consent``)."""

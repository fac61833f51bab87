"""Provenance of every result: a signed C2PA manifest (``manifest.py``) and an invisible
watermark in the pixels (``watermark.py`` via ``facegate.engine.watermark``), both tied to
an opaque mark of the job (``marks.py``), and the check that reads them back (``verify.py``).
docs/provenance.md says what is marked, what it proves and what it does not."""

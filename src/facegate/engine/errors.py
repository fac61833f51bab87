"""Typed engine errors. The service maps each to a problem+json response; the CLI prints
the message on one line and exits non-zero."""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error the engine raises on purpose (bad input, missing face, ...)."""

    code = "engine-error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class UnsupportedMedia(EngineError):
    """The bytes are not one of the allowed formats (decided by content, not by name)."""

    code = "unsupported-media"


class MediaTooLarge(EngineError):
    """Input over an explicit limit (bytes, pixels, seconds, frames)."""

    code = "media-too-large"

    def __init__(self, detail: str, *, limit_name: str, limit: int | float, actual: int | float):
        super().__init__(detail)
        self.limit_name = limit_name
        self.limit = limit
        self.actual = actual


class CorruptMedia(EngineError):
    """The format was recognised but the data cannot be decoded (truncated, damaged)."""

    code = "corrupt-media"


class NoFaceDetected(EngineError):
    """A source or target that must contain a face contains none."""

    code = "no-face-detected"


class SourceUnusable(EngineError):
    """A source face the swapper cannot take an identity from (e.g. turned too far from the
    camera for the built-in swapper); the detail says why and what would do."""

    code = "source-unusable"


class WeakSwap(EngineError):
    """A swapped face the recogniser does not read as the source (``engine.report``), under a
    tenant policy that fails such jobs (``weak_swap`` ``fail``); the detail names the face
    and its figures."""

    code = "weak-swap"


class InvalidOptions(EngineError):
    """Processor or pipeline options that fail validation."""

    code = "invalid-options"


class ModelUnavailable(EngineError):
    """A processor's model is not installed or fails verification."""

    code = "model-unavailable"


class Cancelled(EngineError):
    """The caller asked the run to stop."""

    code = "cancelled"


class ContentPolicyViolation(EngineError):
    """Moderation blocked an input or output (``what`` was checked, ``score`` it got; the
    score is for logs, never for the client: it would help tune content past the check)."""

    code = "content-policy-violation"

    def __init__(self, detail: str, *, what: str, score: float, threshold: float) -> None:
        super().__init__(detail)
        self.what = what
        self.score = score
        self.threshold = threshold

"""Secrets never reach a log line.

Two rules, applied to every value of every event (nested dicts and lists too, so
tracebacks rendered as data are covered):

- the user-info part of any URL (``postgresql://user:password@host``) becomes ``***``;
- every configured secret (``Settings.secret_values()``: the ``SecretStr`` fields and the
  passwords inside the database, Redis and storage URLs) is replaced by ``***`` wherever
  it appears, however it got into the text (an exception message, a repr).

Frame locals are never rendered at all (``facegate.observability.logging`` turns them off):
they held ``Settings`` objects, request bodies and keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from structlog.typing import EventDict, WrappedLogger

MASK = "***"
# scheme://userinfo@ — userinfo up to the last '@' before the host part.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@'\"]+@")
# Secrets shorter than this are not searched for (they would mask ordinary words).
_MIN_SECRET_LENGTH = 4


class Redactor:
    """A structlog processor with the secrets it masks; reconfigured at start-up."""

    def __init__(self) -> None:
        self.secrets: tuple[str, ...] = ()

    def configure(self, secrets: Iterable[str]) -> None:
        found = {s for s in secrets if s and len(s) >= _MIN_SECRET_LENGTH}
        # Longest first: a secret containing another is masked whole.
        self.secrets = tuple(sorted(found, key=len, reverse=True))

    def text(self, value: str) -> str:
        # Every log line passes here: the cheap containment tests decide whether the
        # regular expression and the replacements are needed at all.
        if "@" in value and "://" in value:
            value = _URL_USERINFO.sub(rf"\g<scheme>{MASK}@", value)
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(item) for item in value)
        return value

    def __call__(self, _: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
        for key, item in event_dict.items():
            if not isinstance(item, int | float | bool | None):
                event_dict[key] = self.value(item)
        return event_dict


redactor = Redactor()

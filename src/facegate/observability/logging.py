"""Structured logs: one JSON object per line, ready for Loki.

Every event carries ``request_id``, ``tenant_id``, ``job_id`` (when known) and ``action``
(the event name unless given). Inside a request they come from the request's ASGI scope:
:class:`~facegate.api.metrics.ObservabilityMiddleware` puts the scope in a context
variable, and the principal dependency writes ``request.state.principal`` into that same
scope, so log lines emitted in thread-pool handlers see the tenant too (a context variable
*set* in a worker thread would not travel back to the request's context).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable
from contextvars import ContextVar
from typing import IO, Any

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor, WrappedLogger

from facegate.observability.redaction import redactor

_request_scope: ContextVar[dict[str, Any] | None] = ContextVar("facegate_scope", default=None)


def bind_request_scope(scope: dict[str, Any]) -> Any:
    """Make ``scope`` the current request's (returns the token for :func:`reset`)."""
    return _request_scope.set(scope)


def reset_request_scope(token: Any) -> None:
    _request_scope.reset(token)


def current_request_id() -> str | None:
    scope = _request_scope.get()
    if scope is None:
        return None
    value = (scope.get("state") or {}).get("request_id")
    return str(value) if value else None


def add_request_context(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """Fill request_id, tenant_id, actor and job_id from the current request, and action."""
    scope = _request_scope.get()
    if scope is not None:
        state = scope.get("state") or {}
        if state.get("request_id"):
            # The scope's id wins over a context variable: on a keep-alive connection the
            # next request's task starts with a copy of the previous one's context.
            event_dict["request_id"] = state["request_id"]
        principal = state.get("principal")
        if principal is not None:
            event_dict.setdefault("tenant_id", principal.tenant_id)
            event_dict.setdefault("actor", principal.actor)
        job_id = (scope.get("path_params") or {}).get("job_id")
        if job_id is not None:
            event_dict.setdefault("job_id", str(job_id))
    event_dict.setdefault("action", event_dict.get("event"))
    return event_dict


class _Output:
    """Where rendered lines go: a configured stream, else ``sys.stdout`` looked up at write
    time (so pytest's capture or a replaced stdout is honoured). Cached loggers hold no
    stream of their own, so reconfiguring the output reaches them too."""

    stream: IO[str] | None = None
    lock = threading.Lock()


class LineLogger:
    """Writes each rendered event as one line."""

    def msg(self, message: str) -> None:
        stream = _Output.stream or sys.stdout
        with _Output.lock:
            stream.write(message + "\n")
            stream.flush()

    log = debug = info = warn = warning = error = critical = exception = fatal = msg


def _line_logger_factory(*_: Any) -> LineLogger:
    return LineLogger()


def shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        add_request_context,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        # Tracebacks as JSON data: a multi-line traceback would break one-event-per-line.
        # No frame locals: they held settings, request bodies and keys (and 100s of KB).
        structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
        redactor,
    ]


def configure_logging(
    level: str = "info",
    *,
    fmt: str = "json",
    stream: IO[str] | None = None,
    cache: bool = True,
    secrets: Iterable[str] = (),
) -> None:
    """Configure structlog (and route the standard library's loggers through it).

    ``fmt``: ``json`` (production, Loki) or ``console`` (a developer's terminal).
    ``secrets``: values masked in every line (``Settings.secret_values()``).
    """
    redactor.configure(secrets)
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    renderer: Processor = (
        structlog.dev.ConsoleRenderer(colors=False)
        if fmt == "console"
        else structlog.processors.JSONRenderer(sort_keys=False)
    )
    structlog.configure(
        processors=[*shared_processors(), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_line_logger_factory,
        cache_logger_on_first_use=cache,
    )
    if stream is not None:
        set_log_output(stream)
    _route_stdlib(numeric, renderer)


def set_log_output(stream: IO[str] | None) -> None:
    """Send log lines to ``stream`` (None: the current ``sys.stdout``). Kept across
    :func:`configure_logging` calls that pass no stream (each ``create_app`` configures)."""
    _Output.stream = stream


class _StreamHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.line = LineLogger()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.line.msg(self.format(record))
        except Exception:
            self.handleError(record)


# Loggers whose INFO lines are the service's own news (uvicorn's "running on", startup,
# shutdown): rendered like every other line instead of in uvicorn's console format.
INFO_LOGGERS = ("uvicorn.error",)
# What ``uvicorn.run`` needs so that its lines come through here (one format) and a request
# is logged once: by the http.request event of the metrics middleware, not by uvicorn too.
UVICORN_LOGGING: dict[str, Any] = {"log_config": None, "access_log": False}


class _LibraryLevel(logging.Filter):
    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= max(self.level, logging.WARNING):
            return True
        return record.levelno >= self.level and record.name.startswith(INFO_LOGGERS)


def _route_stdlib(level: int, renderer: Processor) -> None:
    # Libraries log through ``logging``; their warnings and errors are rendered the same
    # way. Their INFO chatter (alembic's migration steps, httpx requests) is left out: it
    # would land in the output of CLI commands that run a migration.
    handler = _StreamHandler()
    handler.setLevel(level)
    handler.addFilter(_LibraryLevel(level))
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared_processors()],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _StreamHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)

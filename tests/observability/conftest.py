from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
import structlog
from obsfactories import database

from facegate.observability.logging import set_log_output

__all__ = ["captured_logs", "database"]


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    """The log lines the app writes during the test (without reconfiguring logging)."""
    stream = io.StringIO()
    set_log_output(stream)
    yield stream
    set_log_output(None)
    structlog.reset_defaults()

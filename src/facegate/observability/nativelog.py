"""Silence the native libraries' chatter on stderr (mediapipe's absl and TFLite lines).

mediapipe's graphs write straight to file descriptor 2 from C++ threads, at creation and at
each model's first inference (``INFO: Created TensorFlow Lite XNNPACK delegate``, ``WARNING:
All log messages before absl::InitializeLog()``, ``W0000 … inference_feedback_manager.cc…``,
``W0000 … landmark_projection_calculator.cc…``); no setting turns them off (GLOG_minloglevel,
TF_CPP_MIN_LOG_LEVEL and ABSL_MIN_LOG_LEVEL were tried), and they come at first use, from any
thread, whenever a job first meets a face. So the ``facegate`` process keeps fd 2 for itself:
it becomes a pipe, and a thread copies everything to the real stderr except those absl
*info and warning* lines and the TFLite delegate line. Errors (``E…``/``F…``), Python's
tracebacks and warnings, uvicorn's and click's output all pass, and a partial line that
cannot be the start of a filtered one (a progress bar's ``\\r`` updates) passes at once.

A child process (serve's workers, a stream's engine) installs its own filter
(:func:`filter_native_logs`): its fd 2 is the parent's pipe, and two processes writing there
at once (both loading mediapipe at start-up) spliced a TFLite line into an absl one, which
then matched neither pattern and reached the log.

At exit the pipe is drained (a marker sent through it comes back), so a traceback printed on
the way out is not lost. ``FACEGATE_NATIVE_LOGS=1`` (``Settings.native_logs``) leaves stderr
alone (to see everything).
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import threading

NOISE = re.compile(
    rb"^(?:[IW]\d{4} \d\d:\d\d:[\d.]+ +\d+ [\w.-]+:\d+\] .*"
    rb"|INFO: Created TensorFlow Lite XNNPACK delegate for CPU\."
    rb"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR)"
    rb"\r?$"
)
# A partial line is held back only while it could still become a NOISE line.
NOISE_START = (b"I", b"W")
HOLD_LIMIT = 4096
_state: tuple[int, threading.Thread] | None = None  # (the real stderr, the copier)
DRAIN_MARK = b"\0facegate-stderr-drained\0"
_drained = threading.Event()


def noise_filter_installed() -> bool:
    return _state is not None


def install_noise_filter() -> None:
    """Route fd 2 through the filter (once per process; only where fd 2 is the process's
    own stderr, not under pytest's or CliRunner's capture)."""
    global _state
    if _state is not None:
        return
    stderr = sys.__stderr__
    if stderr is None or sys.stderr is not stderr:
        return
    try:
        if stderr.fileno() != 2:
            return
    except (AttributeError, OSError, ValueError):
        return
    stderr.flush()
    real = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    thread = threading.Thread(
        target=_copy, args=(read_end, real), name="facegate-stderr", daemon=True
    )
    _state = (real, thread)
    thread.start()
    atexit.register(_drain)


def filter_native_logs(native_logs: bool) -> None:
    """A child process's first step: its stderr filtered (``native_logs``: the setting
    that leaves it alone)."""
    if not native_logs:
        install_noise_filter()


def filter_chunk(pending: bytes, chunk: bytes) -> tuple[bytes, bytes]:
    """(what to write now, what to hold) after ``chunk`` arrives behind ``pending``."""
    data = pending + chunk
    out = bytearray()
    *lines, tail = data.split(b"\n")
    for line in lines:
        if NOISE.match(line) is None:
            out += line + b"\n"
    if tail and (not tail.startswith(NOISE_START) or len(tail) > HOLD_LIMIT):
        out += tail
        tail = b""
    return bytes(out), tail


def _copy(read_end: int, real: int) -> None:
    pending = b""
    while True:
        try:
            chunk = os.read(read_end, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            break
        drained = DRAIN_MARK in chunk
        out, pending = filter_chunk(pending, chunk.replace(DRAIN_MARK, b""))
        if drained and pending and NOISE.match(pending) is None:
            out, pending = out + pending, b""
        if out:
            _write_all(real, out)
        if drained:
            _drained.set()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except OSError:
            return
        view = view[written:]


def _drain() -> None:
    """At exit: everything written so far reaches the real stderr before the process ends.
    fd 2 stays the pipe (mediapipe's threads may still write while the interpreter shuts
    down, and those lines are filtered too); a marker through the pipe says it is empty."""
    if _state is None:
        return
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    _drained.clear()
    try:
        os.write(2, DRAIN_MARK)
    except OSError:
        return
    _drained.wait(timeout=2)

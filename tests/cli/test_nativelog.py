"""The ``facegate`` process filters mediapipe's absl/TFLite lines off its stderr and lets
everything else through (tracebacks at exit included)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.testdata import FACES

from facegate.observability.nativelog import filter_chunk

ABSL = (
    b"W0000 00:00:1796107271.847553   20555 inference_feedback_manager.cc:114] Feedback "
    b"manager requires a model with a single signature inference.\n"
)
TFLITE = b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
BEFORE_INIT = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
)


@pytest.mark.parametrize(
    ("pending", "chunk", "written", "held"),
    [
        (b"", ABSL + b"kept\n" + TFLITE + BEFORE_INIT, b"kept\n", b""),
        (
            b"",
            b"E0000 00:00:1.5 7 x.cc:1] an error\n",
            b"E0000 00:00:1.5 7 x.cc:1] an error\n",
            b"",
        ),
        (b"", ABSL[:30], b"", ABSL[:30]),  # could still be noise: held
        (ABSL[:30], ABSL[30:], b"", b""),  # ... and it was
        (b"", b"\rswapping  12.0 fps  [###   ]", b"\rswapping  12.0 fps  [###   ]", b""),
        (b"", b"Traceback (most", b"Traceback (most", b""),
        (b"", b"W" + b"x" * 5000, b"W" + b"x" * 5000, b""),  # too long to be a log line
    ],
)
def test_filter_chunk(pending: bytes, chunk: bytes, written: bytes, held: bytes) -> None:
    assert filter_chunk(pending, chunk) == (written, held)


def facegate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from facegate.cli import main; main()", *args]
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=180, check=False
    )


def test_a_swap_prints_its_summary_and_nothing_native(tmp_path: Path) -> None:
    source, target = (
        FACES / "woman_a_selfie_frontal_01.jpg",
        FACES / "group_2_women_laughing_angled.jpg",
    )
    done = facegate("swap", str(source), str(target), "-o", "out.jpg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("wrote out.jpg: 2 of 2 faces swapped in ")
    failed = facegate(
        "swap", str(FACES / "no_face_cat.png"), str(target), "-o", "x.jpg", cwd=tmp_path
    )
    assert failed.returncode == 2
    assert failed.stderr == "error: no-face-detected: source image 1 has no face\n"


def test_a_swap_ending_without_teardown_still_says_everything(tmp_path: Path) -> None:
    """`facegate swap` ends its process without the interpreter's teardown once the result
    is written (``exit_without_teardown``): what it printed still reaches a pipe, stdout
    (block-buffered there) and the filtered stderr alike, and an exit handler still runs."""
    marker = tmp_path / "exit-handler-ran"
    command = [
        sys.executable,
        "-c",
        "import atexit, pathlib, sys\n"
        f"atexit.register(pathlib.Path({str(marker)!r}).touch)\n"
        "from facegate.cli import main\n"
        "main()",
        "swap",
        str(FACES / "woman_a_selfie_frontal_01.jpg"),
        str(FACES / "man_frontal_glasses.jpg"),
        "-o",
        "out.jpg",
        "--json",
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "out.jpg"
    assert done.stderr == ""
    assert marker.exists()
    assert (tmp_path / "out.jpg").stat().st_size > 0

"""What `facegate swap` loads before it has swapped: a guard on the command's cold start.

A fresh interpreter runs the command on one photo and lists the modules it ended with. The
service's own stack (the ORM and its migrations, the HTTP framework), onnxruntime (the
built-in swapper runs no ONNX model) and scipy (``engine.mesh`` keeps its table) each cost a
part of the 1.5 s the command may take from start to file written (issue 28); none of them
may come back. Counting modules, not seconds: the check holds on a loaded machine too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.testdata import FACES

import facegate

SRC = Path(facegate.__file__).resolve().parents[1]
#: Never loaded by `facegate swap` with the built-in swapper: name -> why it is not needed.
NOT_AT_START = {
    "sqlalchemy": "the service's database; the engine alone writes a file",
    "alembic": "migrations",
    "fastapi": "the HTTP layer",
    "starlette": "the HTTP layer",
    "onnxruntime": "no ONNX model runs for mesh_warp",
    "scipy": "engine.mesh keeps the mirror assignment as a table",
    "boto3": "S3 storage",
    "av": "PyAV: the video stack, for a video target only",
    "onnx": "the ONNX graph builder: only an ONNX swapper's or the recogniser's load",
    "structlog": "the service's logging (with rich, ~65 ms); the circuit breakers' only",
    "rich": "structlog's console renderer, with it",
    "yaml": "YAML model manifests: the built-in swapper reads none",
    # mediapipe's drawing helpers import pyplot (~0.5 s); engine.mediapipe_import defers them
    "matplotlib": "mediapipe's drawing helpers, never called by the engine",
    "mpl_toolkits": "matplotlib's, with it",
}

# Printed by an exit handler: `facegate swap` ends its process without the interpreter's
# teardown once the result is written, but its exit handlers run.
LIST_MODULES = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(name.split(".")[0] for name in sys.modules))))
{body}
"""


def loaded_after(body: str, cwd: Path) -> set[str]:
    """The top-level packages a fresh interpreter has loaded after running ``body``."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "FACEGATE_DATA_DIR": str(cwd / "var")}
    done = subprocess.run(
        [sys.executable, "-c", LIST_MODULES.format(body=body)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    names: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return set(names)


def test_facegate_swap_of_one_photo_loads_nothing_it_does_not_use(tmp_path: Path) -> None:
    out = tmp_path / "out.jpg"
    argv = [
        "facegate",
        "swap",
        str(FACES / "woman_a_selfie_frontal_01.jpg"),
        str(FACES / "man_frontal_glasses.jpg"),
        "-o",
        str(out),
        "-q",
    ]
    body = (
        f"sys.argv = {argv!r}\n"
        "from facegate.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
    )
    loaded = loaded_after(body, tmp_path)
    assert out.is_file()  # the command ran to the end
    assert "mediapipe" in loaded  # (and the check sees what the command loads)
    assert sorted(loaded & set(NOT_AT_START)) == []


@pytest.mark.parametrize(
    ("module", "package"),
    [
        ("facegate.database", "sqlalchemy"),
        ("facegate.api.app", "sqlalchemy"),
        ("facegate.engine.video", "av"),
        ("facegate.resilience", "structlog"),
        ("facegate.engine.networks.contracts", "onnx"),
    ],
)
def test_the_check_sees_a_module_that_loads_the_service_stack(
    tmp_path: Path, module: str, package: str
) -> None:
    # Planted: what a stray import of any of them at the top of the swap path would add.
    assert package in loaded_after(f"import {module}", tmp_path)


def test_the_mediapipe_parts_the_engine_does_not_run_load_when_first_used(tmp_path: Path) -> None:
    """Deferred, not removed: whoever uses them gets the real modules (and their imports)."""
    body = (
        "import facegate.engine.faces\n"
        "from facegate.engine.mediapipe_import import DEFERRED, DeferredModule\n"
        "assert all(type(sys.modules[name]) is DeferredModule for name in DEFERRED)\n"
        "assert 'matplotlib' not in sys.modules\n"
        "import mediapipe as mp\n"
        "assert mp.solutions.drawing_utils.draw_landmarks.__name__ == 'draw_landmarks'\n"
        "assert mp.solutions.pose.Pose.__module__ == 'mediapipe.python.solutions.pose'\n"
        "assert mp.tasks.vision.FaceLandmarker.__name__ == 'FaceLandmarker'\n"
        "assert type(sys.modules[DEFERRED[0]]) is type(sys)\n"
    )
    assert "matplotlib" in loaded_after(body, tmp_path)

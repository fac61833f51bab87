"""``FACEGATE_INFERENCE_*`` reach the inference pool a process really runs its models on:
set in the environment, they are the threads an onnxruntime session loaded by a job of the
embedded workers was created with, on the device asked for, in a pool bounded as asked.
Unset, the pool keeps the engine's own defaults. A bad value stops a process at start with
one line naming the variable (exit status 2 from the CLI), never a traceback or a job that
fails later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnxruntime as ort
import pytest
from click.testing import CliRunner
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, photo, submit, wait_terminal
from tests.conftest import make_settings
from tests.moderationkit import STANDIN_TAG, install_standin
from tests.testdata import FACES

from facegate.api.app import create_app
from facegate.cli import main
from facegate.cli.worker import _runs_on_device
from facegate.engine.modelstore.inference import PoolSettings
from facegate.errors import InvalidSettings
from facegate.models.requests import inference_pool_settings, installation_engine
from facegate.settings import get_settings
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)

HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()
SET = {
    "FACEGATE_INFERENCE_INTRA_OP_THREADS": "3",
    "FACEGATE_INFERENCE_INTER_OP_THREADS": "2",
    "FACEGATE_INFERENCE_MAX_BYTES": "123456789",
    "FACEGATE_INFERENCE_DEVICE": "cpu",
    "FACEGATE_INFERENCE_SPIN_WAIT": "true",
}
SPINNING = "session.intra_op.allow_spinning"


async def test_the_environment_reaches_the_sessions_a_job_loads(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SET.items():
        monkeypatch.setenv(name, value)
    # Moderation runs the stand-in classifier, an ONNX model of the store, on every job.
    install_standin(tmp_path / "models")
    async with make_client(services=[workers_service], workers=1) as h:
        pool = h.state.face_engine.hub.pool
        assert len(pool) == 0
        h.create_tenant("acme", **DEBUG_TENANT_POLICY)
        headers = h.headers("acme")
        response = await submit(h.client, headers, photo())
        done = await wait_terminal(h.client, headers, response.json()["id"])
        assert done["status"] == "succeeded", done

        # The job loaded the classifier into the runtime's pool; asking again hands out
        # that same session.
        (label,) = [key for key in pool.stats.loaded if STANDIN_TAG in key]
        kind, path = label.split("|")
        assert kind == "onnx"
        session = pool.session(Path(path))
        assert len(pool) == 1
        options = session.get_session_options()
        assert options.intra_op_num_threads == 3
        assert options.inter_op_num_threads == 2
        assert session.get_providers() == ["CPUExecutionProvider"]
        with pytest.raises(Exception, match=SPINNING):  # onnxruntime's own default: spinning
            options.get_session_config_entry(SPINNING)
        assert pool.settings == PoolSettings(
            max_bytes=123456789,
            intra_op_threads=3,
            inter_op_threads=2,
            device="cpu",
            spin_wait=True,
        )


def test_unset_the_pool_keeps_the_engines_defaults(tmp_path: Path) -> None:
    install_standin(tmp_path / "models")
    runtime = installation_engine(make_settings(tmp_path))
    try:
        assert runtime.hub.pool.settings == PoolSettings()
        # The threads of every session wait passively between runs: on shared cores a
        # spinning thread takes CPU from its neighbours (benchmarks/moderation_bench.py).
        session = runtime.hub.onnx("open_nsfw").session
        assert session.get_session_options().get_session_config_entry(SPINNING) == "0"
    finally:
        runtime.close()


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [
        ("FACEGATE_INFERENCE_INTRA_OP_THREADS", "-1", "greater than or equal to 0"),
        ("FACEGATE_INFERENCE_INTER_OP_THREADS", "many", "valid integer"),
        ("FACEGATE_INFERENCE_MAX_BYTES", "-5", "greater than or equal to 0"),
        ("FACEGATE_INFERENCE_DEVICE", "gpu", "'auto', 'cuda' or 'cpu'"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, rule: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidSettings) as raised:
        get_settings()
    assert f"{name}={value!r}" in str(raised.value)
    assert rule in str(raised.value)
    out = tmp_path / "out.jpg"
    source, target = FACES / "woman_a_selfie_frontal_01.jpg", FACES / "man_frontal_glasses.jpg"
    result = CliRunner().invoke(main, ["swap", str(source), str(target), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"Error: {raised.value}"]
    assert not out.exists()


@pytest.mark.skipif(HAS_CUDA, reason="this onnxruntime has the CUDA provider")
def test_cuda_without_its_provider_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path, inference_device="cuda")
    refusal = r"FACEGATE_INFERENCE_DEVICE=cuda: .*CUDAExecutionProvider"
    with pytest.raises(InvalidSettings, match=refusal):
        inference_pool_settings(settings)
    # The API (and serve) refuse before a server listens; swap before it reads an image.
    with pytest.raises(InvalidSettings, match="FACEGATE_INFERENCE_DEVICE=cuda"):
        create_app(settings)
    monkeypatch.setenv("FACEGATE_INFERENCE_DEVICE", "cuda")
    out = tmp_path / "out.jpg"
    source, target = FACES / "woman_a_selfie_frontal_01.jpg", FACES / "man_frontal_glasses.jpg"
    result = CliRunner().invoke(main, ["swap", str(source), str(target), "-o", str(out)])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: FACEGATE_INFERENCE_DEVICE=cuda: ")
    assert not out.exists()


def test_a_worker_holds_a_device_when_its_models_run_on_cuda(tmp_path: Path) -> None:
    # facegate worker's --device default, as its --help says.
    assert _runs_on_device(make_settings(tmp_path, inference_device="cuda"))
    assert not _runs_on_device(make_settings(tmp_path, inference_device="cpu"))
    assert _runs_on_device(make_settings(tmp_path)) == HAS_CUDA
    shown = CliRunner().invoke(main, ["worker", "--help"], terminal_width=200).output
    assert "Default: when the models run on CUDA (FACEGATE_INFERENCE_DEVICE cuda" in shown

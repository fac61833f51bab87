"""Which onnxruntime execution providers a device setting picks, for every install."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore import inference
from facegate.engine.modelstore.inference import (
    Device,
    InferencePool,
    PoolSettings,
    available_providers,
    first_run,
)
from onnx_graphs import affine_graph

CPU_ONLY = ["AzureExecutionProvider", "CPUExecutionProvider"]
WITH_CUDA = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


@pytest.mark.parametrize(
    ("installed", "device", "expected"),
    [
        (CPU_ONLY, "auto", ("CPUExecutionProvider",)),
        (CPU_ONLY, "cpu", ("CPUExecutionProvider",)),
        (WITH_CUDA, "auto", ("CUDAExecutionProvider", "CPUExecutionProvider")),
        (WITH_CUDA, "cpu", ("CPUExecutionProvider",)),
        (WITH_CUDA, "cuda", ("CUDAExecutionProvider",)),
    ],
)
def test_the_best_installed_provider_comes_first(
    monkeypatch: pytest.MonkeyPatch,
    installed: list[str],
    device: Device,
    expected: tuple[str, ...],
) -> None:
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: installed)
    assert available_providers(device) == expected


def test_cuda_without_the_cuda_provider_is_an_error_not_a_cpu_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: CPU_ONLY)
    with pytest.raises(ModelUnavailable, match="CUDAExecutionProvider") as raised:
        available_providers("cuda")
    assert "AzureExecutionProvider, CPUExecutionProvider" in raised.value.detail


def test_this_install_runs_models_on_what_it_has() -> None:
    # The real onnxruntime of this environment: CPU always, CUDA first where installed.
    chosen = available_providers("auto")
    assert chosen[-1] == "CPUExecutionProvider"
    assert chosen[0] in onnxruntime.get_available_providers()


class SeenAsCuda:
    """A real CPU session that says it runs on the CUDA provider, counting its runs."""

    def __init__(self, path: str, sess_options: object, providers: list[object]) -> None:
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.feeds: list[dict[str, np.ndarray]] = []

    def get_providers(self) -> list[str]:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]

    def get_inputs(self) -> list[object]:
        return list(self.session.get_inputs())

    def run(self, outputs: object, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.feeds.append(feed)
        return list(self.session.run(None, feed))


@pytest.mark.parametrize(("device", "runs"), [("cuda", 1), ("cpu", 0)])
def test_a_model_warmed_up_on_cuda_has_made_its_first_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, device: Device, runs: int
) -> None:
    """The warm-up list's models on the CUDA provider run once on zeros (their first call
    sets up the device's kernels: ~1.1 s on an H200); on the CPU they are loaded only."""
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: WITH_CUDA)
    monkeypatch.setattr(inference, "load_cuda_libraries", lambda: None)
    path = affine_graph(tmp_path / "affine.onnx", "input", "output", [1, 3, "height", 64], 2.0, 0.5)
    made: list[object] = []

    def factory(path: str, sess_options: object, providers: list[object]) -> object:
        made.append(SeenAsCuda(path, sess_options, providers) if device == "cuda" else None)
        return made[-1] or onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])

    pool = InferencePool(PoolSettings(device=device), session_factory=factory)
    pool.warm_up([path])
    if device == "cuda":
        (session,) = made
        assert isinstance(session, SeenAsCuda)
        assert [
            {k: (v.shape, v.dtype.name, v.any()) for k, v in f.items()} for f in session.feeds
        ] == [{"input": ((1, 3, 1, 64), "float32", False)}]
    assert sum(len(s.feeds) for s in made if isinstance(s, SeenAsCuda)) == runs


def test_a_first_run_that_the_model_refuses_is_no_failure(tmp_path: Path) -> None:
    path = affine_graph(tmp_path / "affine.onnx", "input", "output", [1, 3, 8, 8], 2.0, 0.5)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert first_run(session)

    class Refusing:
        def get_inputs(self) -> list[object]:
            return list(session.get_inputs())

        def run(self, outputs: object, feed: object) -> None:
            raise RuntimeError("zeros are not a picture")

    assert not first_run(Refusing())

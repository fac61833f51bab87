"""The CUDA execution path: with onnxruntime-gpu on an NVIDIA machine (the ``cuda`` image
variant), models load on the CUDA provider through the shared pool and give the CPU's
results. Skipped, with the reason, where onnxruntime has no CUDA provider (CI, and any
machine without onnxruntime-gpu and an NVIDIA driver)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from facegate.engine.modelstore.inference import Device, InferencePool, PoolSettings
from facegate.engine.networks.onnx_swap import OnnxSwapBackend
from facegate.engine.swap.options import FaceSwapperOptions
from onnx_graphs import affine_graph, create_face, create_frame, create_hub, save_graph

INSTALLED = ort.get_available_providers()
pytestmark = pytest.mark.skipif(
    "CUDAExecutionProvider" not in INSTALLED,
    reason="needs onnxruntime-gpu and an NVIDIA GPU (the cuda image variant); "
    f"this onnxruntime has {', '.join(INSTALLED)}",
)


def test_a_model_runs_on_the_cuda_provider(tmp_path: Path) -> None:
    path = affine_graph(tmp_path / "affine.onnx", "input", "output", [1, 3, 64, 64], 2.0, 0.5)
    pool = InferencePool(PoolSettings(device="cuda"))
    session = pool.session(path)
    assert session.get_providers()[0] == "CUDAExecutionProvider"
    x = np.random.default_rng(1).normal(size=(1, 3, 64, 64)).astype(np.float32)
    (out,) = session.run(None, {"input": x})
    np.testing.assert_allclose(out, x * 2.0 + 0.5, rtol=1e-6)
    # One pool, two devices: the CPU session of the same file is another entry.
    cpu = pool.session(path, device="cpu")
    assert cpu is not session
    assert cpu.get_providers() == ["CPUExecutionProvider"]


@pytest.mark.parametrize("boost", [None, 256])
def test_a_swap_on_cuda_gives_the_cpu_result(tmp_path: Path, boost: int | None) -> None:
    frame = create_frame(400, 400)
    size = boost or 128
    face = create_face("arcface_128", size, (100, 90))
    options = FaceSwapperOptions(model="inswapper_128", mask_blur=0.0)
    object.__setattr__(options, "pixel_boost_size", boost)  # as in test_onnx_swap
    results = {}
    devices: tuple[Device, ...] = ("cpu", "cuda")
    for device in devices:
        (tmp_path / device).mkdir()
        pool = InferencePool(PoolSettings(device=device))
        hub = create_hub(tmp_path / device, "inswapper_128", (0.9, 0.6, 1.1), pool)
        backend = OnnxSwapBackend("inswapper_128", hub)
        state = backend.prepare_source([face], [frame], options)
        results[device] = backend.swap_face(frame, state, face, options)
    assert not np.array_equal(results["cpu"], frame)  # the swap changed the face
    difference = np.abs(results["cuda"].astype(int) - results["cpu"].astype(int))
    assert difference.max() <= 1


def test_a_cuda_session_keeps_to_the_pool_s_memory_cap(tmp_path: Path) -> None:
    """The pool's cap reaches the CUDA provider (``gpu_mem_limit``, the growth strategy):
    a model whose output is 256 MiB runs uncapped and fails under a 64 MiB cap."""
    mib = 1 << 20
    path = save_graph(
        tmp_path / "tile.onnx",
        [helper.make_node("Tile", ["input", "repeats"], ["output"])],
        [("input", [1, 1024, 1024])],
        [("output", [64, 1024, 1024])],
        [np.array([64, 1, 1], np.int64)],
        ["repeats"],
    )
    x = np.ones((1, 1024, 1024), np.float32)
    capped = InferencePool(PoolSettings(device="cuda", gpu_mem_limit=64 * mib)).session(path)
    options = capped.get_provider_options()["CUDAExecutionProvider"]
    assert options["gpu_mem_limit"] == str(64 * mib)
    assert options["arena_extend_strategy"] == "kSameAsRequested"
    with pytest.raises(Exception, match=r"(?i)alloc|memory"):
        capped.run(None, {"input": x})
    uncapped = InferencePool(PoolSettings(device="cuda")).session(path)
    (out,) = uncapped.run(None, {"input": x})
    assert out.shape == (64, 1024, 1024)

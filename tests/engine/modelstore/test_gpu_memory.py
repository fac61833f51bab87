"""The GPU path of the memory budget, on a fake device that accounts memory (no GPU here):
the CUDA provider gets the settings' ``gpu_mem_limit`` and ``arena_extend_strategy``, a
session's arena then stays within its cap, and a run that needs more fails in that
session instead of taking the device from the others."""

from __future__ import annotations

from pathlib import Path

import onnxruntime
import pytest
from tests.fakedevice import MIB, FakeCudaSession, FakeDevice, session_factory

from facegate.engine.modelstore import inference
from facegate.engine.modelstore.inference import InferencePool, PoolSettings, provider_options
from facegate.models.requests import inference_pool_settings
from facegate.settings import Settings

GIB = 2**30
WITH_CUDA = ["CUDAExecutionProvider", "CPUExecutionProvider"]


def model_file(tmp_path: Path, name: str, size: int) -> Path:
    path = tmp_path / name
    with path.open("wb") as handle:
        handle.truncate(size)  # sparse: the weights' size without the bytes
    return path


def test_the_cuda_provider_gets_the_arena_settings() -> None:
    settings = PoolSettings(gpu_mem_limit=3 * GIB, arena_extend_strategy="kSameAsRequested")
    assert provider_options(WITH_CUDA, settings) == [
        (
            "CUDAExecutionProvider",
            {
                "device_id": "0",
                "arena_extend_strategy": "kSameAsRequested",
                "gpu_mem_limit": str(3 * GIB),
            },
        ),
        "CPUExecutionProvider",
    ]
    # no cap set: onnxruntime's own (none); the CPU provider takes no options
    uncapped = provider_options(WITH_CUDA, PoolSettings(arena_extend_strategy="kNextPowerOfTwo"))
    assert uncapped[0] == (
        "CUDAExecutionProvider",
        {"device_id": "0", "arena_extend_strategy": "kNextPowerOfTwo"},
    )
    assert provider_options(["CPUExecutionProvider"], settings) == ["CPUExecutionProvider"]


def test_the_settings_reach_the_pool() -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        inference_gpu_mem_limit=5 * GIB,
        inference_arena_extend_strategy="kNextPowerOfTwo",
    )
    pool = inference_pool_settings(settings)
    assert (pool.gpu_mem_limit, pool.arena_extend_strategy) == (5 * GIB, "kNextPowerOfTwo")
    default = inference_pool_settings(Settings(_env_file=None))  # type: ignore[call-arg]
    assert (default.gpu_mem_limit, default.arena_extend_strategy) == (None, "kSameAsRequested")


@pytest.fixture
def cuda_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: WITH_CUDA)
    monkeypatch.setattr(inference, "load_cuda_libraries", lambda: None)


@pytest.mark.usefixtures("cuda_installed")
def test_a_session_stays_within_its_cap_on_the_device(tmp_path: Path) -> None:
    device = FakeDevice(total=8 * GIB)
    made: list[FakeCudaSession] = []
    pool = InferencePool(
        PoolSettings(device="cuda", gpu_mem_limit=2 * GIB),
        session_factory=session_factory(device, made),
    )
    upscaler = pool.session(model_file(tmp_path, "upscaler.onnx", 64 * MIB))
    swapper = pool.session(model_file(tmp_path, "swapper.onnx", 512 * MIB))
    assert isinstance(upscaler, FakeCudaSession)
    assert isinstance(swapper, FakeCudaSession)
    assert upscaler.cuda_options["gpu_mem_limit"] == str(2 * GIB)
    upscaler.run(1 * GIB)  # a tile's working memory: within the cap
    assert upscaler.reserved == 64 * MIB + 1 * GIB  # grown by what was asked, no more
    with pytest.raises(RuntimeError, match="Failed to allocate memory"):
        upscaler.run(3 * GIB)  # an untiled frame: refused in its own session
    assert upscaler.reserved <= 2 * GIB
    swapper.run(1 * GIB)  # the other session still has its room on the device
    assert device.peak <= 2 * (2 * GIB)  # two sessions, each within its cap


@pytest.mark.usefixtures("cuda_installed")
def test_powers_of_two_reserve_more_than_asked(tmp_path: Path) -> None:
    device = FakeDevice(total=80 * GIB)
    made: list[FakeCudaSession] = []
    pool = InferencePool(
        PoolSettings(device="cuda", arena_extend_strategy="kNextPowerOfTwo"),
        session_factory=session_factory(device, made),
    )
    session = pool.session(model_file(tmp_path, "m.onnx", 1 * MIB))
    assert isinstance(session, FakeCudaSession)
    session.run(1100 * MIB)
    # kNextPowerOfTwo took a 2 GiB region for a 1.1 GiB need: why the budget's default is
    # kSameAsRequested (the estimate is what the device then holds).
    assert session.reserved == 1 * MIB + 2 * GIB


def test_the_cuda_libraries_are_loaded_through_onnxruntime_s_preload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before its first CUDA session the pool loads the CUDA libraries with onnxruntime's
    own ``preload_dlls``, importing onnxruntime there (the module does not at start): the
    fake device above replaces this step, so it is called here for real."""
    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(onnxruntime, "preload_dlls", lambda *a: calls.append(a), raising=False)
    inference.load_cuda_libraries.cache_clear()
    try:
        inference.load_cuda_libraries()
        inference.load_cuda_libraries()
    finally:
        inference.load_cuda_libraries.cache_clear()
    assert calls == [()]  # once per process

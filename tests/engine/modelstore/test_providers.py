"""Which onnxruntime execution providers a device setting picks, for every install."""

from __future__ import annotations

import onnxruntime
import pytest

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.inference import Device, available_providers

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

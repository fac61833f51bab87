"""A CUDA device that only accounts memory, and onnxruntime sessions on it that allocate the
way the CUDA provider's arena does (no GPU here: the provider options and the budget logic
are tested against it; the real device is measured by benchmarks/cuda_bench.py when one is
lent).

The arena follows onnxruntime's BFC arena as its documentation describes it: it reserves
regions of the device and never hands them back while the session lives; it grows by the
shortfall (``kSameAsRequested``) or by regions that double each time, starting at 1 MiB
(``kNextPowerOfTwo``), never past ``gpu_mem_limit``, where the request fails with the
provider's "Failed to allocate memory" instead.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

MIB = 2**20


class DeviceOutOfMemory(RuntimeError):
    """The device itself is full (a real device would fail the CUDA allocation)."""


class FakeDevice:
    """Bytes reserved on one device, the peak, and a refusal past ``total``."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.reserved = 0
        self.peak = 0
        self._lock = threading.Lock()

    def reserve(self, size: int) -> None:
        with self._lock:
            if self.reserved + size > self.total:
                raise DeviceOutOfMemory(f"{size} more bytes do not fit {self.total}")
            self.reserved += size
            self.peak = max(self.peak, self.reserved)

    def release(self, size: int) -> None:
        with self._lock:
            self.reserved -= size


class FakeCudaSession:
    """A session of a model whose weights are its file's size and whose run needs
    ``run_bytes`` of working memory from the session's arena."""

    def __init__(
        self, device: FakeDevice, path: str, sess_options: Any, providers: list[Any]
    ) -> None:
        self.device = device
        self.providers = providers
        cuda = dict(next(p for p in providers if isinstance(p, tuple))[1])
        self.cuda_options = cuda
        limit = cuda.get("gpu_mem_limit")
        self.limit = int(limit) if limit is not None else None
        self.strategy = cuda.get("arena_extend_strategy", "kNextPowerOfTwo")
        self.reserved = 0
        self.in_use = 0
        self.region = MIB
        self._lock = threading.Lock()
        weights = Path(path).stat().st_size
        self.allocate(weights)
        self.weights = weights

    def allocate(self, size: int) -> None:
        free = self.reserved - self.in_use
        if size > free:
            short = size - free
            grow = short
            if self.strategy == "kNextPowerOfTwo":
                while self.region < short:
                    self.region *= 2
                grow = self.region
                self.region *= 2
                if self.limit is not None and self.reserved + grow > self.limit:
                    grow = short  # the arena retries with just what is needed
            if self.limit is not None and self.reserved + grow > self.limit:
                raise RuntimeError(
                    "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Failed to allocate memory "
                    f"for requested buffer of size {size}"
                )
            self.device.reserve(grow)
            self.reserved += grow
        self.in_use += size

    def run(self, run_bytes: int) -> None:
        with self._lock:
            self.allocate(run_bytes)
            self.in_use -= run_bytes  # back to the arena, not to the device

    def close(self) -> None:
        self.device.release(self.reserved)
        self.reserved = self.in_use = 0


def session_factory(device: FakeDevice, made: list[FakeCudaSession]) -> Any:
    """An InferencePool ``session_factory`` that makes FakeCudaSessions on ``device``."""

    def make(path: str, sess_options: Any, providers: list[Any]) -> FakeCudaSession:
        session = FakeCudaSession(device, path, sess_options, providers)
        made.append(session)
        return session

    return make

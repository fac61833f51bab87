"""The inference pool: one loaded session per (model file, device, providers), shared read-only
by every tenant and thread (onnxruntime's ``InferenceSession.run`` and ncnn extractors are
safe to call concurrently), bounded by an LRU on estimated memory (the file size).

Execution providers are chosen from what is installed: CUDA first when ``onnxruntime-gpu``
is present (the ``cuda`` variant of the container image installs it in place of
``onnxruntime``), else the CPU; asking for ``cuda`` where it is missing is an error, never a
silent run on the CPU. The CUDA provider's memory arena is capped and grown as
``PoolSettings`` says (``gpu_mem_limit``, ``arena_extend_strategy``: the memory budget of
a device worker, docs/scheduling-memory.md). Before the first CUDA session the CUDA and
cuDNN libraries are loaded from the ``nvidia-*`` wheels installed beside onnxruntime-gpu (or
the loader's default paths). An evicted session stays valid for whoever still holds it; the
pool only stops handing it out.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from facegate.engine.errors import ModelUnavailable

if TYPE_CHECKING:
    import onnxruntime as ort

Device = Literal["auto", "cuda", "cpu"]
ArenaExtendStrategy = Literal["kNextPowerOfTwo", "kSameAsRequested"]
PREFERRED_PROVIDERS = ("CUDAExecutionProvider", "CPUExecutionProvider")
#: What onnxruntime's InferenceSession takes for ``providers``: a name, or (name, options).
ProviderSpec = str | tuple[str, dict[str, str]]
SessionFactory = Callable[..., Any]
"""Builds a session: ``(path, sess_options=, providers=)``, onnxruntime's InferenceSession
unless a test hands in a fake device's."""

LoadListener = Callable[[str, float], None]
"""Called with (kind, seconds) after each model load ("onnx" | "ncnn"): the service passes
its metrics in, so the engine itself depends on nothing of the service."""


def available_providers(device: Device = "auto") -> tuple[str, ...]:
    """The execution providers to use for ``device``, best first, among those installed.
    ``ModelUnavailable`` for ``cuda`` without onnxruntime's CUDA provider (onnxruntime would
    otherwise take an empty list as "whatever is installed" and run on the CPU)."""
    import onnxruntime  # optional: a process that runs no ONNX model never loads the runtime

    installed = onnxruntime.get_available_providers()
    if device == "cuda":
        if PREFERRED_PROVIDERS[0] not in installed:
            raise ModelUnavailable(
                "device 'cuda' needs onnxruntime's CUDAExecutionProvider (onnxruntime-gpu "
                f"and an NVIDIA driver); this onnxruntime has {', '.join(installed)}"
            )
        return PREFERRED_PROVIDERS[:1]
    wanted = PREFERRED_PROVIDERS if device == "auto" else PREFERRED_PROVIDERS[1:]
    return tuple(p for p in wanted if p in installed) or ("CPUExecutionProvider",)


@dataclass(frozen=True)
class PoolSettings:
    """Thread and memory settings of the pool (the CLI / worker builds them from Settings)."""

    max_bytes: int = 4 << 30
    intra_op_threads: int = 0  # 0: onnxruntime decides (one per core)
    inter_op_threads: int = 1
    # onnxruntime's intra-op threads spin after each run before they sleep (its default):
    # on cores shared with other work that is CPU taken from them (measured on open_nsfw:
    # 22 ms of CPU a run spinning, 14 ms passive, the same ~7 ms wall; models_bench.py).
    spin_wait: bool = False
    device: Device = "auto"
    # onnxruntime's CUDA provider: the cap of each session's memory arena on the device
    # (gpu_mem_limit; None: none) and how the arena grows (arena_extend_strategy).
    gpu_mem_limit: int | None = None
    arena_extend_strategy: ArenaExtendStrategy = "kSameAsRequested"
    device_id: int = 0


def provider_options(providers: Sequence[str], settings: PoolSettings) -> list[ProviderSpec]:
    """``providers`` as onnxruntime's InferenceSession takes them: the CUDA provider with
    the device, its arena cap and growth from ``settings``; the others by name."""
    chosen: list[ProviderSpec] = []
    for name in providers:
        if name != PREFERRED_PROVIDERS[0]:
            chosen.append(name)
            continue
        options = {
            "device_id": str(settings.device_id),
            "arena_extend_strategy": settings.arena_extend_strategy,
        }
        if settings.gpu_mem_limit is not None:
            options["gpu_mem_limit"] = str(settings.gpu_mem_limit)
        chosen.append((name, options))
    return chosen


@dataclass
class _Entry:
    value: Any
    size: int
    load_seconds: float


@dataclass
class PoolStats:
    """What the pool holds and how long loads took (for metrics and the benchmark)."""

    loaded: dict[str, float] = field(default_factory=dict)  # key label -> load seconds
    bytes_held: int = 0
    evictions: int = 0


class InferencePool:
    """A process-wide cache of loaded models (onnxruntime sessions, ncnn nets)."""

    def __init__(
        self,
        settings: PoolSettings | None = None,
        listeners: Sequence[LoadListener] = (),
        session_factory: SessionFactory | None = None,
    ) -> None:
        self.settings = settings or PoolSettings()
        self.listeners = tuple(listeners)
        # None: onnxruntime's InferenceSession, imported with the first ONNX model
        self.session_factory = session_factory
        self._entries: OrderedDict[tuple[str, ...], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[tuple[str, ...], threading.Lock] = {}
        self.stats = PoolStats()

    def session(self, path: Path, *, device: Device | None = None) -> ort.InferenceSession:
        """The shared onnxruntime session of ``path`` (loaded on first use)."""
        providers = available_providers(device or self.settings.device)
        key = ("onnx", str(Path(path).resolve()), device or self.settings.device, *providers)
        session: ort.InferenceSession = self._get(
            key, lambda: self._load_onnx(path, providers), Path(path).stat().st_size
        )
        return session

    def ncnn_net(self, param: Path, weights: Path) -> Any:
        """The shared ncnn net of ``param``/``weights``, on the CPU (no Vulkan here)."""
        key = ("ncnn", str(Path(param).resolve()), str(Path(weights).resolve()), "cpu")
        size = Path(weights).stat().st_size
        return self._get(key, lambda: _load_ncnn(param, weights, self.settings), size)

    def warm_up(self, paths: Iterable[Path | tuple[Path, Path]]) -> dict[str, float]:
        """Load each model now (ONNX paths or (param, bin) pairs); returns load seconds. A
        model loaded on the CUDA provider also runs once on zeros (``first_run``): its
        first call sets up the device's kernels (~1.1 s on an H200), which the first job
        would otherwise wait for."""
        timings: dict[str, float] = {}
        for item in paths:
            start = time.perf_counter()
            if isinstance(item, tuple):
                self.ncnn_net(*item)
                label = str(item[0])
            else:
                session = self.session(item)
                if session.get_providers()[0] == PREFERRED_PROVIDERS[0]:
                    first_run(session)
                label = str(item)
            timings[label] = time.perf_counter() - start
        return timings

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.stats.bytes_held = 0

    def __len__(self) -> int:
        return len(self._entries)

    # -- internals -------------------------------------------------------------------------
    def _get(self, key: tuple[str, ...], load: Any, size: int) -> Any:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry.value
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        # Load outside the pool lock so other models stay usable; the key lock makes two
        # threads asking for the same model share one load.
        with key_lock:
            with self._lock:
                entry = self._entries.get(key)
            if entry is not None:
                return entry.value
            start = time.perf_counter()
            value = load()
            seconds = time.perf_counter() - start
            with self._lock:
                self._entries[key] = _Entry(value, size, seconds)
                self.stats.loaded["|".join(key[:2])] = seconds
                self.stats.bytes_held += size
                self._evict_locked(keep=key)
            for listener in self.listeners:
                listener(key[0], seconds)
            return value

    def _evict_locked(self, keep: tuple[str, ...]) -> None:
        while self.stats.bytes_held > self.settings.max_bytes and len(self._entries) > 1:
            key, entry = next(iter(self._entries.items()))
            if key == keep:
                self._entries.move_to_end(key)
                continue
            del self._entries[key]
            self.stats.bytes_held -= entry.size
            self.stats.evictions += 1

    def _load_onnx(self, path: Path, providers: tuple[str, ...]) -> ort.InferenceSession:
        import onnxruntime as ort  # optional: loaded with the first ONNX model, not at start

        if PREFERRED_PROVIDERS[0] in providers:
            load_cuda_libraries()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.settings.intra_op_threads
        options.inter_op_num_threads = self.settings.inter_op_threads
        if not self.settings.spin_wait:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        factory = self.session_factory or ort.InferenceSession
        session: ort.InferenceSession = factory(
            str(path), sess_options=options, providers=provider_options(providers, self.settings)
        )
        return session


#: numpy's type of each ONNX tensor type a warm-up run can feed zeros of.
_ZEROS_OF = MappingProxyType(
    {
        "tensor(float)": "float32",
        "tensor(float16)": "float16",
        "tensor(double)": "float64",
        "tensor(int64)": "int64",
        "tensor(int32)": "int32",
        "tensor(uint8)": "uint8",
        "tensor(bool)": "bool",
    }
)


def first_run(session: Any) -> bool:
    """Run ``session`` once on zeros of its inputs' shapes (a dimension without a size
    taken as 1); False where an input's type has no zeros here or the model refuses zeros
    (the first job then pays the first call, as before)."""
    feed = {}
    for tensor in session.get_inputs():
        dtype = _ZEROS_OF.get(tensor.type)
        if dtype is None:
            return False
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in tensor.shape]
        feed[tensor.name] = np.zeros(shape, dtype)
    try:
        session.run(None, feed)
    except Exception:  # a model may refuse zeros or need particular sizes: a warm-up only
        return False
    return True


@functools.cache
def load_cuda_libraries() -> None:
    """Load the CUDA and cuDNN libraries that onnxruntime-gpu's CUDA provider links against,
    once per process. The cuda image variant installs them as ``nvidia-*`` wheels
    (requirements/cuda.txt), which are not on the loader's path: without this the provider
    fails to load and onnxruntime runs the session on the CPU. ``preload_dlls`` (onnxruntime
    >= 1.21) looks in those wheels, then the default paths, and prints what it cannot load."""
    import onnxruntime  # optional: called with the first CUDA session's load only

    preload = getattr(onnxruntime, "preload_dlls", None)
    if preload is not None:
        preload()


def import_ncnn() -> Any:
    """``ncnn``, imported lazily (only the built-in enhancers need it) with passive OpenMP
    waiting unless the operator chose otherwise.

    The wheel's bundled libgomp spins between parallel layers by default. On cores shared
    with other work (another worker, the web process) a spinning thread holds the core its
    peer needs to reach the barrier: measured here under load, 2-thread ncnn ran 2-6x slower
    than 1 thread, and about as fast once passive (benchmarks/models_bench.py). libgomp reads
    the variable once, when ncnn's import loads it, so it is set right before that import.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import ncnn  # optional: only the built-in enhancers need it; after the variable above

    return ncnn


def _load_ncnn(param: Path, weights: Path, settings: PoolSettings) -> Any:
    ncnn = import_ncnn()
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    # ncnn's default is one thread per physical core; lightmode (free intermediate blobs
    # early) keeps a tile's peak memory low.
    if settings.intra_op_threads > 0:
        net.opt.num_threads = settings.intra_op_threads
    net.opt.lightmode = True
    if net.load_param(str(param)) != 0 or net.load_model(str(weights)) != 0:
        raise ModelUnavailable(f"ncnn could not load {Path(param).name}")
    return net

"""ModelHub: the store and the pool together, the one object processors ask for models.

Processors are created once per process and shared by all tenants, so the tenant and the
tag choice travel per call (from the JobContext), never on the processor. The process-wide
hub is configured once by the edge (CLI, worker, app) with :func:`configure_default_hub`.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy.typing as npt
import onnxruntime as ort

from facegate.engine.modelstore.inference import InferencePool, PoolSettings
from facegate.engine.modelstore.manifest import ModelVersion
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.modelstore.tags import ModelRequest, TagPolicy


class OnnxModel:
    """A loaded ONNX model version: its session (shared) and its manifest."""

    def __init__(self, session: ort.InferenceSession, version: ModelVersion) -> None:
        self.session = session
        self.version = version
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]

    def run(self, feeds: dict[str, npt.NDArray[Any]]) -> list[npt.NDArray[Any]]:
        outputs: list[npt.NDArray[Any]] = self.session.run(None, feeds)
        return outputs

    def input_shape(self, name: str) -> list[Any]:
        for item in self.session.get_inputs():
            if item.name == name:
                return list(item.shape)
        raise KeyError(name)


class ModelHub:
    """Resolves name/tag/tenant to verified files and hands out pooled sessions."""

    def __init__(
        self,
        store: ModelStore,
        pool: InferencePool | None = None,
        default_tag: str | None = None,
    ) -> None:
        self.store = store
        self.pool = pool if pool is not None else InferencePool()
        #: The installation's MODEL_TAG: applies where a tenant's policy names no tag itself.
        self.default_tag = default_tag

    def resolve(self, name: str, request: ModelRequest | None = None) -> ModelVersion:
        req = request or ModelRequest()
        policy = req.policy
        if self.default_tag is not None:
            if policy is None:
                policy = TagPolicy(default_tag=self.default_tag)
            elif policy.default_tag is None:
                policy = replace(policy, default_tag=self.default_tag)
        return self.store.resolve(
            name, tenant=req.tenant, tag=req.tag, policy=policy, job_id=req.job_id
        )

    def has(self, name: str, request: ModelRequest | None = None) -> bool:
        req = request or ModelRequest()
        return bool(self.store.tags(name, req.tenant))

    def onnx(
        self, name: str, request: ModelRequest | None = None, role: str = "model"
    ) -> OnnxModel:
        version = self.resolve(name, request)
        path = self.store.verified_path(version, role)
        return OnnxModel(self.pool.session(path), version)

    def ncnn(self, name: str, request: ModelRequest | None = None) -> tuple[Any, ModelVersion]:
        version = self.resolve(name, request)
        param = self.store.verified_path(version, "param")
        weights = self.store.verified_path(version, "bin")
        return self.pool.ncnn_net(param, weights), version

    def warm_up(self, names: list[str]) -> dict[str, float]:
        """Verify and load each named shared model now (the start-up warm-up list)."""
        paths: list[Path | tuple[Path, Path]] = []
        for name in names:
            version = self.resolve(name)
            roles = {f.role for f in version.files}
            if {"param", "bin"} <= roles:
                pair = (
                    self.store.verified_path(version, "param"),
                    self.store.verified_path(version, "bin"),
                )
                paths.append(pair)
            elif version.file().path.suffix == ".onnx":
                paths.append(self.store.verified_path(version))
        return self.pool.warm_up(paths)


_default_lock = threading.Lock()
_default: list[ModelHub] = []  # a one-slot cache of read-only shared state, never per job


def configure_default_hub(
    models: Path | ModelStore,
    settings: PoolSettings | None = None,
    warm_up: list[str] | None = None,
    default_tag: str | None = None,
) -> ModelHub:
    """Set the process-wide hub (called once by the edge that read the Settings)."""
    store = models if isinstance(models, ModelStore) else ModelStore(models)
    hub = ModelHub(store, InferencePool(settings), default_tag=default_tag)
    if warm_up:
        hub.warm_up(warm_up)
    with _default_lock:
        _default[:] = [hub]
    return hub


def use_model_store(
    store: ModelStore, *, default_tag: str | None = None, warm_up: list[str] | None = None
) -> ModelHub:
    """The default hub, (re)configured only when it uses another store or has another
    default tag, so the sessions already pooled for the same store are kept (the service's
    start-up hook); ``warm_up`` names are loaded now either way."""
    with _default_lock:
        current = _default[0] if _default else None
    if current is not None and current.store is store and current.default_tag == default_tag:
        if warm_up:
            current.warm_up(warm_up)
        return current
    return configure_default_hub(store, warm_up=warm_up, default_tag=default_tag)


def default_hub() -> ModelHub:
    """The process-wide hub; unconfigured, it uses FACEGATE_MODELS_DIR or ./var/models."""
    with _default_lock:
        if not _default:
            root = Path(os.environ.get("FACEGATE_MODELS_DIR", "./var/models"))
            _default.append(ModelHub(ModelStore(root)))
        return _default[0]


class UsesModelHub:
    """Base of processors whose models come from the model store.

    The hub is resolved when used, not when the processor is built, so the hub the service
    configures at start-up (``use_model_store``) is the one every cached processor uses; tests
    pass their own.
    """

    def __init__(self, hub: ModelHub | None = None) -> None:
        self._hub = hub

    @property
    def hub(self) -> ModelHub:
        return self._hub if self._hub is not None else default_hub()

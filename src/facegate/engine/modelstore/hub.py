"""ModelHub: the store and the pool together, the one object processors ask for models.

Processors are created once per engine runtime and shared by all tenants, so the tenant and
the tag choice travel per call (from the JobContext), never on the processor. The hub is
built with the runtime (``engine.runtime.EngineRuntime``) by the edge that read the Settings.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy.typing as npt

from facegate.engine.modelstore.inference import InferencePool
from facegate.engine.modelstore.manifest import ModelVersion
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.modelstore.tags import ModelRequest, TagPolicy

if TYPE_CHECKING:
    import onnxruntime as ort


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

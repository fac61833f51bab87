"""EngineRuntime: everything the engine keeps loaded, built once by the edge and passed in.

The engine holds no process-wide state of its own: the model hub (store + pooled sessions),
the processor registry (one shared instance of each processor), the face analyser, the
identity describer and the cache of analysed sources live on this object. The composition
roots (the CLI, the API's start-up, a worker process) build one from the Settings and hand it
to what runs pipelines; tests and benchmarks build their own. Everything on it is read-only
once loaded, or guarded by its own lock, so one runtime serves every tenant and job of a
process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from facegate.engine.faces import AnalyserOptions, FaceAnalyser
from facegate.engine.identity import IdentityDescriber
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.inference import InferencePool, LoadListener, PoolSettings
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.pipeline import Pipeline, PipelineSpec
from facegate.engine.processors.registry import ProcessorRegistry
from facegate.engine.sourcecache import SourceFaceCache


@dataclass(frozen=True)
class EngineRuntime:
    hub: ModelHub
    registry: ProcessorRegistry
    analyser: FaceAnalyser
    identity: IdentityDescriber = field(default_factory=IdentityDescriber)
    #: Faces of source images by a key the caller names (``source_keys``): a batch's items
    #: (one source, many targets) analyse their source once. Serves this analyser only.
    source_cache: SourceFaceCache = field(default_factory=SourceFaceCache)

    @classmethod
    def create(
        cls,
        models: ModelStore | Path,
        *,
        pool: PoolSettings | None = None,
        default_tag: str | None = None,
        warm_up: Sequence[str] = (),
        analyser: AnalyserOptions | None = None,
        load_listeners: Sequence[LoadListener] = (),
    ) -> EngineRuntime:
        """A runtime over ``models`` (a store, or the folder of one). ``warm_up`` names are
        verified and loaded now; ``load_listeners`` hear of every model load (metrics)."""
        store = models if isinstance(models, ModelStore) else ModelStore(models)
        hub = ModelHub(store, InferencePool(pool, load_listeners), default_tag=default_tag)
        if warm_up:
            hub.warm_up(list(warm_up))
        return cls(hub=hub, registry=ProcessorRegistry(hub), analyser=FaceAnalyser(analyser))

    def pipeline(self, spec: PipelineSpec) -> Pipeline:
        """``spec`` validated against this runtime's processors, ready to run."""
        return Pipeline(
            spec,
            analyser=self.analyser,
            registry=self.registry,
            identity=self.identity,
            source_cache=self.source_cache,
        )

    def close(self) -> None:
        """Free the analyser's graphs and the processors' models (the process is ending)."""
        self.analyser.close()
        self.registry.release_all()

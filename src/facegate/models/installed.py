"""What is installed for a tenant (built-ins + the shared store + its own models), for
``/v1/capabilities`` and the check at submission: asking for an absent processor or model is
a 409 naming it, before anything is stored."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from facegate.engine.modelstore.manifest import SAFE_NAME
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.networks.live_portrait import PARTS as LIVE_PORTRAIT_PARTS
from facegate.engine.networks.swap_models import SWAPPERS
from facegate.engine.pipeline import PipelineSpec
from facegate.errors import Conflict, InvalidInput
from facegate.settings import Settings
from facegate.storage.remote_models import ObjectStorageModels

if TYPE_CHECKING:
    from facegate.resilience import BreakerConfig

RECOGNIZER = "arcface_w600k_r50"
BUILTIN_SWAP_BACKENDS = frozenset({"mesh_warp"})
# The model a processor uses when the job names none (the processors' option defaults).
DEFAULT_MODELS: dict[str, str] = {
    "face_enhancer": "realesr_animevideov3_x4",
    "frame_enhancer": "realesr_animevideov3_x2",
    "age_modifier": "styleganex_age",
    "expression_restorer": "live_portrait",
}
MODEL_PROCESSORS = frozenset(DEFAULT_MODELS)


def installation_model_store(settings: Settings) -> ModelStore:
    """The installation's model store, one per process and configuration (it caches sha256
    checks and listings): the models folder, or with ``FACEGATE_MODELS_IN_STORAGE`` (the
    cluster shape) the shared object storage, the folder then only caching its files."""
    if not settings.models_in_storage:
        return _model_store(settings.models_dir, None, None)
    # optional: the storage client's circuit breaker (structlog) serves the cluster shape only
    from facegate.resilience import BreakerConfig

    return _model_store(
        settings.models_dir, settings.storage_url, BreakerConfig.from_settings(settings)
    )


@lru_cache(maxsize=8)
def _model_store(
    models_dir: Path, storage_url: str | None, breaker: BreakerConfig | None
) -> ModelStore:
    if storage_url is None or breaker is None:
        return ModelStore(Path(models_dir))
    # optional: as above (the storage factory builds its stores with the breaker)
    from facegate.storage.factory import shared_object_store

    return ModelStore(
        Path(models_dir), remote=ObjectStorageModels(shared_object_store(storage_url, breaker))
    )


def needed_models(processor: str, model: str) -> list[str]:
    """Store models one choice needs (an ONNX swapper also needs the recognizer, ...)."""
    if processor == "face_swapper":
        if model in BUILTIN_SWAP_BACKENDS:
            return []
        spec = SWAPPERS.get(model)
        extra = [spec.converter] if spec is not None and spec.converter else []
        return [model, RECOGNIZER, *extra]
    if processor == "expression_restorer" and model == "live_portrait":
        return list(LIVE_PORTRAIT_PARTS)
    if processor == "age_modifier" and model == "fran":
        return ["fran"]  # the age estimate (fairface) is optional: see the processor
    return [model]


def missing_models(store: ModelStore, tenant: str, processor: str, model: str) -> list[str]:
    return [name for name in needed_models(processor, model) if not store.tags(name, tenant)]


def installed_models(store: ModelStore, tenant: str) -> list[str]:
    """Names of every model the tenant's jobs can resolve, plus the built-in swap backends."""
    names = {version.name for version in store.list_models(tenant)}
    return sorted(names | BUILTIN_SWAP_BACKENDS)


def processor_installed(store: ModelStore, tenant: str, processor: str) -> bool:
    """A processor without models is always there; one with models needs its default or any
    model of its kind visible to the tenant."""
    if processor not in MODEL_PROCESSORS:
        return True
    if not missing_models(store, tenant, processor, DEFAULT_MODELS[processor]):
        return True
    kinds = {v.kind for v in store.list_models(tenant)}
    if processor == "expression_restorer":
        return False  # all three LivePortrait parts are needed
    return processor in kinds


def check_spec_installed(spec: PipelineSpec, tenant: str, store: ModelStore) -> None:
    """409 ``model-not-installed`` naming the first absent processor or model of the spec."""
    for processor in spec.processors:
        model = spec.processor_options.get(processor, {}).get("model")
        if isinstance(model, str) and not SAFE_NAME.match(model):
            raise InvalidInput(
                f"{processor}: {model[:100]!r} is not a model name "
                "(letters, digits, '.', '_' and '-')",
                code="invalid-options",
            )
        if isinstance(model, str):
            absent = missing_models(store, tenant, processor, model)
            if absent:
                raise Conflict(
                    f"{processor}: model {absent[0]!r} is not installed"
                    + (f" (needed by {model!r})" if absent[0] != model else ""),
                    code="model-not-installed",
                    processor=processor,
                    model=absent[0],
                )
        elif not processor_installed(store, tenant, processor):
            raise Conflict(
                f"processor {processor!r} has no model installed "
                f"(its default is {DEFAULT_MODELS[processor]!r})",
                code="processor-not-installed",
                processor=processor,
                model=DEFAULT_MODELS[processor],
            )

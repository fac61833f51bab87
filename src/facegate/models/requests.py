"""The bridge from the installation and a tenant's policy to the engine: the engine runtime a
process runs with, and the ModelRequest a job runs with (tenant, pinned tags, A/B split, job
id)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from facegate.engine.errors import InvalidOptions, ModelUnavailable
from facegate.engine.modelstore.inference import PoolSettings, available_providers
from facegate.engine.modelstore.tags import ModelRequest, TagPolicy
from facegate.engine.runtime import EngineRuntime
from facegate.errors import InvalidSettings
from facegate.models.installed import installation_model_store
from facegate.observability import metrics
from facegate.settings import Settings

if TYPE_CHECKING:  # the table's class only types the policy: `facegate swap` loads no ORM
    from facegate.tenancy.tables import Policy


def tag_policy_of(policy: Policy) -> TagPolicy | None:
    """The policy's MODEL_TAG, pins and A/B splits, or None when it sets none of them."""
    pins = dict(policy.model_pins or {})
    splits = {name: dict(weights) for name, weights in (policy.model_splits or {}).items()}
    if policy.model_tag is None and not pins and not splits:
        return None
    try:
        return TagPolicy(default_tag=policy.model_tag, pins=pins, splits=splits)
    except InvalidOptions:
        return None  # the schema refuses bad splits; a stale row falls back to the newest


def model_request_for(tenant_id: str, job_id: str, policy: Policy) -> ModelRequest:
    """What a job of ``tenant_id`` resolves models with: its private models, its pins, and
    its A/B variant (deterministic in ``job_id``, so a retry keeps the same variant)."""
    return ModelRequest(tenant=tenant_id, policy=tag_policy_of(policy), job_id=job_id)


def inference_pool_settings(settings: Settings) -> PoolSettings:
    """The inference pool's threads, memory bound and device (``FACEGATE_INFERENCE_*``).
    :class:`InvalidSettings` when the device is ``cuda`` and this onnxruntime cannot run
    on it: the process stops at start rather than fail each job. Only ``cuda`` can fail:
    other devices are not checked here, so a process that runs no ONNX model (``facegate
    swap`` with the built-in swapper) never loads onnxruntime."""
    if settings.inference_device == "cuda":
        try:
            available_providers(settings.inference_device)
        except ModelUnavailable as exc:
            raise InvalidSettings(f"FACEGATE_INFERENCE_DEVICE=cuda: {exc}") from None
    return PoolSettings(
        max_bytes=settings.inference_max_bytes,
        intra_op_threads=settings.inference_intra_op_threads,
        inter_op_threads=settings.inference_inter_op_threads,
        spin_wait=settings.inference_spin_wait,
        device=settings.inference_device,
        gpu_mem_limit=settings.inference_gpu_mem_limit,
        arena_extend_strategy=settings.inference_arena_extend_strategy,
    )


def installation_engine(settings: Settings) -> EngineRuntime:
    """The engine runtime of a process serving this installation (built once by its
    composition root: the API's start-up, a worker process, the CLI): the installation's
    model store with its MODEL_TAG default, the inference pool of
    :func:`inference_pool_settings`, every model load observed by the metrics.
    Processes that run jobs load ``warmup_list(settings)`` with ``hub.warm_up`` at start."""
    return EngineRuntime.create(
        installation_model_store(settings),
        pool=inference_pool_settings(settings),
        default_tag=settings.model_tag,
        load_listeners=[metrics.model_loaded],
    )

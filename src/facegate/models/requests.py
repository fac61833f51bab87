"""The bridge from a tenant's policy to the engine's model resolution: the ModelRequest a job
runs with (tenant, pinned tags, A/B split, job id)."""

from __future__ import annotations

from facegate.engine.errors import InvalidOptions
from facegate.engine.modelstore.hub import use_model_store
from facegate.engine.modelstore.tags import ModelRequest, TagPolicy
from facegate.models.installed import installation_model_store
from facegate.settings import Settings, warmup_list
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


def use_installation_models(settings: Settings) -> None:
    """Point the engine at the installation's model store, with its MODEL_TAG default and
    warm-up list (called once where workers start: embedded and cluster)."""
    use_model_store(
        installation_model_store(settings),
        default_tag=settings.model_tag,
        warm_up=warmup_list(settings),
    )

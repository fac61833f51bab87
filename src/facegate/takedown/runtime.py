"""What an erasure needs from the settings: the object store, the installation's keys and
the tenant's Redis keys (none without ``FACEGATE_REDIS_URL``)."""

from __future__ import annotations

import redis

from facegate.provenance.keys import InstallationKeys, load_keys
from facegate.ratelimit.tenantkeys import delete_tenant_keys, tenant_keys
from facegate.resilience import BreakerConfig
from facegate.settings import Settings
from facegate.storage.base import ObjectStore
from facegate.storage.factory import shared_object_store
from facegate.takedown.erasure import RedisKeys


def object_store_for(settings: Settings) -> ObjectStore:
    return shared_object_store(settings.storage_url, BreakerConfig.from_settings(settings))


def keys_for(settings: Settings) -> InstallationKeys:
    return load_keys(settings.provenance_path)


def redis_keys_for(settings: Settings) -> RedisKeys | None:
    url = settings.redis_url
    if url is None or url.startswith("memory://"):
        return None
    client = redis.Redis.from_url(url)
    prefix = settings.rate_limit_key_prefix
    return RedisKeys(
        find=lambda tenant_id: tenant_keys(client, prefix, tenant_id),
        delete=lambda tenant_id: delete_tenant_keys(client, prefix, tenant_id),
    )

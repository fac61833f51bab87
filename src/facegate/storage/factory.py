"""Choose the ObjectStore adapter from ``FACEGATE_STORAGE_URL``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

from facegate.resilience import BreakerConfig
from facegate.storage.base import ObjectStore, StorageError
from facegate.storage.local import LocalStore
from facegate.storage.memory import MemoryStore


def store_from_url(url: str, breaker: BreakerConfig) -> ObjectStore:
    """``file://./var/storage`` or ``file:///abs/path`` → LocalStore; ``memory://`` →
    MemoryStore (tests); ``s3://bucket?endpoint_url=...`` → S3Store (see storage.s3) behind a
    breaker configured by ``breaker``."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        # file://./rel keeps "." as the netloc; file:///abs has an empty one.
        raw = unquote(parts.netloc + parts.path)
        if not raw:
            raise StorageError(f"storage URL {url!r} names no folder")
        return LocalStore(Path(raw))
    if parts.scheme == "memory":
        return MemoryStore()
    if parts.scheme == "s3":
        # optional: boto3, loaded only by installations that use S3
        from facegate.storage.s3 import S3Store

        return S3Store.from_url(url, breaker)
    raise StorageError(f"unsupported storage URL scheme {parts.scheme!r} in {url!r}")


@lru_cache(maxsize=16)
def shared_object_store(url: str, breaker: BreakerConfig) -> ObjectStore:
    """One ObjectStore per URL (and breaker configuration) per process, shared by the tenant
    store and the model store (a ``memory://`` store is then the same for both)."""
    return store_from_url(url, breaker)

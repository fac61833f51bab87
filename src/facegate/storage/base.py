"""The ObjectStore port: a flat namespace of keys holding bytes.

The methods are the handful S3 offers (put, get, delete, list by prefix, head), so an S3
adapter can implement the same Protocol without translation layers. Keys are validated by
every adapter with one strict pattern: lower-level code never trusts a key it is given.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from facegate.errors import OutOfStorage

#: A tenant id as it may appear in a storage key (``storage.tenant`` builds every key).
TENANT_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")

# Segments of letters, digits, dot, dash and underscore, separated by single slashes; no
# segment may start with a dot (so no "." / ".." and no hidden files), no leading slash.
KEY_PATTERN = re.compile(
    r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,127}(/[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,127}){0,15}$"
)
PREFIX_PATTERN = re.compile(r"^([A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,127}/){0,16}$")
CHUNK_SIZE = 1024 * 1024


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object as a listing describes it (S3's ``Key``, ``Size``,
    ``LastModified``): what a reconciliation with the ledger needs."""

    key: str
    size: int
    modified: datetime  # timezone-aware UTC


class StorageError(Exception):
    """Base of storage failures the service may translate into a response."""


class InvalidKey(StorageError):
    """A key (or prefix) that does not match the strict key pattern, or escapes the root."""


class ObjectNotFound(StorageError):
    """No object under that key."""


class StorageQuotaExceeded(StorageError):
    """Writing would take the tenant over its storage quota."""

    def __init__(self, *, quota_bytes: int, used_bytes: int, requested_bytes: int) -> None:
        super().__init__(
            f"storage quota of {quota_bytes} bytes exceeded: {used_bytes} used, "
            f"{requested_bytes} more requested"
        )
        self.quota_bytes = quota_bytes
        self.used_bytes = used_bytes
        self.requested_bytes = requested_bytes

    def problem(self) -> OutOfStorage:
        """The service error a caller answers with (507 over HTTP)."""
        return OutOfStorage(
            str(self),
            limit="storage_quota_bytes",
            value=self.quota_bytes,
            used_bytes=self.used_bytes,
            requested_bytes=self.requested_bytes,
        )


def data_size(data: bytes | Path) -> int:
    """The size of an artifact given as bytes or as a local file (not read for this)."""
    return len(data) if isinstance(data, bytes) else data.stat().st_size


def file_chunks(path: Path, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """A local file's bytes in chunks (to ``put_stream`` a result without loading it)."""
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_size):
            yield chunk


def check_key(key: str) -> str:
    """Return ``key`` when it matches the strict pattern, else raise InvalidKey."""
    if not KEY_PATTERN.fullmatch(key):
        raise InvalidKey(f"invalid object key: {key!r}")
    return key


def check_prefix(prefix: str) -> str:
    """A prefix is empty or whole key segments each followed by a slash."""
    if not PREFIX_PATTERN.fullmatch(prefix):
        raise InvalidKey(f"invalid key prefix: {prefix!r}")
    return prefix


@runtime_checkable
class ObjectStore(Protocol):
    """Bytes by key. Implementations: LocalStore (a folder), MemoryStore (tests), S3."""

    def put(self, key: str, data: bytes) -> int:
        """Store ``data`` under ``key`` (replacing any object there); return its size."""
        ...

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> int:
        """Store the concatenated chunks under ``key`` atomically; return the size."""
        ...

    def get(self, key: str) -> bytes:
        """The object's bytes, else ObjectNotFound."""
        ...

    def open(self, key: str) -> BinaryIO:
        """A readable binary file object over the object (caller closes it)."""
        ...

    def iter_chunks(self, key: str, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
        """The object's bytes in chunks, for streaming responses."""
        ...

    def delete(self, key: str) -> bool:
        """Remove the object; True when something was removed."""
        ...

    def list(self, prefix: str = "") -> list[str]:
        """Keys under ``prefix`` (whole segments), sorted."""
        ...

    def list_objects(self, prefix: str = "") -> builtins.list[ObjectInfo]:
        """The objects under ``prefix`` with their size and last write, sorted by key."""
        ...

    def size(self, key: str) -> int:
        """The object's size in bytes, else ObjectNotFound."""
        ...

    def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""
        ...


@runtime_checkable
class PresigningStore(Protocol):
    """A store that can hand out short-lived direct download URLs (S3Store)."""

    def presigned_url(
        self, key: str, expires_seconds: int | None = None, *, filename: str | None = None
    ) -> str:
        """A GET URL for ``key`` that expires after ``expires_seconds``; with ``filename``
        the download is served as an attachment of that name."""
        ...

"""An in-memory ObjectStore for unit tests of logic above the storage port."""

from __future__ import annotations

import builtins
import io
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import BinaryIO

from facegate.storage.base import CHUNK_SIZE, ObjectInfo, ObjectNotFound, check_key, check_prefix


class MemoryStore:
    """Objects in a dict, guarded by a lock; validates keys exactly like LocalStore."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}
        self._modified: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes) -> int:
        check_key(key)
        with self._lock:
            self._objects[key] = bytes(data)
            self._modified[key] = datetime.now(UTC)
        return len(data)

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> int:
        return self.put(key, b"".join(chunks))

    def get(self, key: str) -> bytes:
        check_key(key)
        with self._lock:
            try:
                return self._objects[key]
            except KeyError:
                raise ObjectNotFound(key) from None

    def open(self, key: str) -> BinaryIO:
        return io.BytesIO(self.get(key))

    def iter_chunks(self, key: str, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
        data = self.get(key)
        for start in range(0, len(data), chunk_size):
            yield data[start : start + chunk_size]

    def delete(self, key: str) -> bool:
        check_key(key)
        with self._lock:
            self._modified.pop(key, None)
            return self._objects.pop(key, None) is not None

    def list(self, prefix: str = "") -> list[str]:
        check_prefix(prefix)
        with self._lock:
            return sorted(k for k in self._objects if k.startswith(prefix))

    def list_objects(self, prefix: str = "") -> builtins.list[ObjectInfo]:
        check_prefix(prefix)
        with self._lock:
            return [
                ObjectInfo(key, len(data), self._modified[key])
                for key, data in sorted(self._objects.items())
                if key.startswith(prefix)
            ]

    def size(self, key: str) -> int:
        return len(self.get(key))

    def exists(self, key: str) -> bool:
        check_key(key)
        with self._lock:
            return key in self._objects

"""LocalStore: objects as files under one root folder (the embedded shape's storage).

Two defences against path tricks: keys must match the strict key pattern (no ``..``, no
absolute paths, no odd characters), and the resolved path — symlinks followed — must still
lie inside the resolved root. A symlink planted inside the root that points elsewhere is
refused rather than followed.
"""

from __future__ import annotations

import builtins
import os
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from facegate.storage.base import (
    CHUNK_SIZE,
    InvalidKey,
    ObjectInfo,
    ObjectNotFound,
    check_key,
    check_prefix,
)


class LocalStore:
    """An ObjectStore over a folder; writes are atomic (temp file + rename)."""

    def __init__(self, root: str | Path) -> None:
        root_path = Path(root)
        root_path.mkdir(parents=True, exist_ok=True)
        self.root = root_path.resolve(strict=True)

    def _path(self, key: str) -> Path:
        check_key(key)
        path = (self.root / key).resolve(strict=False)
        if not path.is_relative_to(self.root) or path == self.root:
            raise InvalidKey(f"object key {key!r} resolves outside the storage root")
        return path

    def put(self, key: str, data: bytes) -> int:
        return self.put_stream(key, [data])

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> int:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Re-check after mkdir: a directory component could be a symlink created meanwhile.
        self._path(key)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        size = 0
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk in chunks:
                    handle.write(chunk)
                    size += len(chunk)
            os.replace(tmp_name, path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return size

    def get(self, key: str) -> bytes:
        with self.open(key) as handle:
            return handle.read()

    def open(self, key: str) -> BinaryIO:
        path = self._path(key)
        try:
            return path.open("rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None

    def iter_chunks(self, key: str, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
        handle = self.open(key)
        with handle:
            while chunk := handle.read(chunk_size):
                yield chunk

    def delete(self, key: str) -> bool:
        path = self._path(key)
        try:
            path.unlink()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return False
        self._prune_empty_dirs(path.parent)
        return True

    def _prune_empty_dirs(self, folder: Path) -> None:
        while folder != self.root and folder.is_relative_to(self.root):
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    def list(self, prefix: str = "") -> list[str]:
        check_prefix(prefix)
        base = (self.root / prefix).resolve(strict=False)
        if not base.is_relative_to(self.root) or not base.is_dir():
            return []
        keys: list[str] = []
        for dirpath, _dirnames, filenames in os.walk(base):
            for filename in filenames:
                if filename.startswith("."):
                    continue  # temp files of writes in flight
                rel = (Path(dirpath) / filename).relative_to(self.root).as_posix()
                keys.append(rel)
        return sorted(keys)

    def list_objects(self, prefix: str = "") -> builtins.list[ObjectInfo]:
        found = []
        for key in self.list(prefix):
            try:
                stat = (self.root / key).stat()
            except FileNotFoundError:
                continue  # deleted since the listing
            modified = datetime.fromtimestamp(stat.st_mtime, UTC)
            found.append(ObjectInfo(key, stat.st_size, modified))
        return found

    def size(self, key: str) -> int:
        path = self._path(key)
        if not path.is_file():
            raise ObjectNotFound(key)
        return path.stat().st_size

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

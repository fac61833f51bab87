"""LocalStore: objects as files under one root folder (the embedded shape's storage).

Two defences against path tricks: keys must match the strict key pattern (no ``..``, no
absolute paths, no odd characters), and a path with a symlink on it is resolved (the link
followed) and must still lie inside the resolved root and, for a tenant's key, inside that
tenant's folder. A symlink planted inside the root that points elsewhere (another tenant's
folder included) is refused rather than followed.
"""

from __future__ import annotations

import builtins
import os
import stat
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
        self._root_text = str(self.root)

    def _path(self, key: str) -> Path:
        """The file of ``key``. Each existing component of its path is looked at with
        ``lstat`` (down to the first that does not exist: nothing below it can be a
        link): none a symlink, the path is the key's own, inside the root. Where one is,
        the path is resolved (links followed) and must still lie inside the root and,
        for a tenant's key (``tenants/<tenant>/...``), inside that tenant's folder. (A
        ``Path.resolve`` on every call cost ~5x these checks.)"""
        check_key(key)
        current = self._root_text
        for part in key.split("/"):
            current = f"{current}/{part}"
            try:
                mode = os.lstat(current).st_mode
            except (FileNotFoundError, NotADirectoryError):
                break
            if stat.S_ISLNK(mode):
                return self._resolved(key)
        return Path(f"{self._root_text}/{key}")

    def _resolved(self, key: str) -> Path:
        """The path of a key with a symlink on it, resolved and checked."""
        path = (self.root / key).resolve(strict=False)
        if not path.is_relative_to(self.root) or path == self.root:
            raise InvalidKey(f"object key {key!r} resolves outside the storage root")
        parts = key.split("/")
        if len(parts) > 2 and parts[0] == "tenants":
            folder = self.root / "tenants" / parts[1]
            if not path.is_relative_to(folder) or path == folder:
                raise InvalidKey(f"object key {key!r} resolves outside its tenant's folder")
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
                info = (self.root / key).stat()
            except FileNotFoundError:
                continue  # deleted since the listing
            modified = datetime.fromtimestamp(info.st_mtime, UTC)
            found.append(ObjectInfo(key, info.st_size, modified))
        return found

    def size(self, key: str) -> int:
        path = self._path(key)
        if not path.is_file():
            raise ObjectNotFound(key)
        return path.stat().st_size

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

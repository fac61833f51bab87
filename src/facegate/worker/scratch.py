"""Scratch space that outlives no worker: every worker process keeps its temporary files
(a video job's target copy and partial result, probes) in one folder of its own, held by an
exclusive ``flock`` for the life of the process.

A process killed outright (SIGKILL, the OOM killer) cannot delete its folder, but the
kernel drops its lock. :func:`reclaim` deletes every folder whose lock can be taken — its
owner is gone — and is run when a worker starts and on each reaper round, so repeated kills
on big videos no longer fill the temporary directory (an ``emptyDir`` that survives
container restarts in the manifests). The lock, unlike a pid, cannot be mistaken for a
live process after a container restart reuses the pid.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import structlog

log = structlog.get_logger("facegate.worker.scratch")

PREFIX = "facegate-scratch-"
LOCK_NAME = ".owner"
#: A folder without its lock file yet is left alone this long (its owner may be creating it).
UNLOCKED_GRACE_SECONDS = 60.0


def system_tempdir() -> Path:
    """The temporary directory the scratch folders live in (TMPDIR), also once this process
    pointed ``tempfile`` at its own folder."""
    current = Path(tempfile.gettempdir())
    return current.parent if current.name.startswith(PREFIX) else current


class ScratchSpace:
    """One process's scratch folder under ``parent`` (the temporary directory)."""

    def __init__(self, parent: Path | None = None) -> None:
        self.parent = Path(parent or system_tempdir())
        self._path: Path | None = None
        self._lock_fd: int | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            raise RuntimeError("the scratch space is not open")
        return self._path

    @property
    def is_open(self) -> bool:
        return self._path is not None

    def open(self) -> Path:
        """Make and lock this process's folder (reclaiming the dead ones first)."""
        if self._path is not None:
            return self._path
        self.parent.mkdir(parents=True, exist_ok=True)
        reclaim(self.parent)
        path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=self.parent))
        fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._path, self._lock_fd = path, fd
        log.info("scratch.opened", path=str(path))
        return path

    def use_for_process(self) -> Path:
        """Open it and make it this process's temporary directory (``tempfile``): for a
        process that is one service for its whole life (``facegate api``, ``serve``,
        ``worker``), so every temporary file it writes is reclaimed if it is killed."""
        path = self.open()
        tempfile.tempdir = str(path)
        return path

    def job_folder(self, prefix: str) -> Path:
        """A fresh folder for one job's files: inside this process's folder when open,
        else in the temporary directory (a runner used outside a worker)."""
        parent = self._path if self._path is not None else None
        return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))

    def close(self) -> None:
        """Delete this process's folder (a clean stop)."""
        if self._path is None:
            return
        shutil.rmtree(self._path, ignore_errors=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
        self._path, self._lock_fd = None, None


@asynccontextmanager
async def process_scratch_service(_state: object) -> AsyncIterator[Path]:
    """A server process's scratch space as one of its app's background services
    (``facegate.api.app.ServiceFactory``): made this process's temporary directory at
    start-up and deleted at a clean stop (SIGTERM, Ctrl-C: uvicorn runs the lifespan's
    shutdown), in each process of ``facegate api --processes N`` too. A killed process's
    folder is reclaimed by the next one (:func:`reclaim`)."""
    scratch = ScratchSpace()
    path = scratch.use_for_process()
    try:
        yield path
    finally:
        scratch.close()
        tempfile.tempdir = None  # the folder is gone: back to TMPDIR


def reclaim(parent: Path) -> list[Path]:
    """Delete the scratch folders under ``parent`` whose owner process is gone."""
    removed: list[Path] = []
    try:
        folders = [p for p in parent.iterdir() if p.name.startswith(PREFIX) and p.is_dir()]
    except OSError:
        return removed
    for folder in folders:
        if _owner_gone(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        log.warning("scratch.reclaimed", folders=[str(p) for p in removed])
    return removed


def _owner_gone(folder: Path) -> bool:
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDWR)
    except FileNotFoundError:
        # Made but not locked yet (its owner is in open()), or the owner died in between.
        try:
            age = time.time() - folder.stat().st_mtime
        except OSError:
            return False
        return age > UNLOCKED_GRACE_SECONDS
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # held: its owner is alive
    finally:
        os.close(fd)  # closing drops the lock we may have taken
    return True

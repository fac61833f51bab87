"""Analysed source images, kept by a key the caller chooses (for the service: the tenant
and the sha256 of the image's bytes), so the items of a batch — the same source × many
targets — analyse their source once.

Bounded (least recently used go first), thread-safe, and one analysis per key at a time:
workers that ask for a key being analysed wait for that analysis instead of repeating it.
Callers get deep copies: a pipeline annotates its source faces (``extra``), and one job's
annotations must never reach another's faces.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from facegate.engine.types import Face

DEFAULT_ENTRIES = 64


class SourceFaceCache:
    """The faces an analyser found in source images, by key."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES) -> None:
        self.max_entries = max(1, max_entries)
        self._faces: OrderedDict[Hashable, list[Face]] = OrderedDict()
        self._lock = threading.Lock()
        self._busy: dict[Hashable, threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    def faces(self, key: Hashable, analyse: Callable[[], list[Face]]) -> list[Face]:
        """The faces of the image ``key`` names, analysed by ``analyse()`` on first use."""
        with self._lock:
            found = self._take(key)
            if found is not None:
                return found
            busy = self._busy.setdefault(key, threading.Lock())
        with busy:  # one analysis per key; the others wait for it, then read it
            with self._lock:
                found = self._take(key)
                if found is not None:
                    return found
                self.misses += 1
            try:
                analysed = analyse()
            finally:
                with self._lock:
                    self._busy.pop(key, None)
            with self._lock:
                self._faces[key] = analysed
                self._faces.move_to_end(key)
                while len(self._faces) > self.max_entries:
                    self._faces.popitem(last=False)
            return copy.deepcopy(analysed)

    def _take(self, key: Hashable) -> list[Face] | None:
        """A copy of the cached faces (a hit), or None; the caller holds the lock."""
        cached = self._faces.get(key)
        if cached is None:
            return None
        self._faces.move_to_end(key)
        self.hits += 1
        return copy.deepcopy(cached)

    def __len__(self) -> int:
        with self._lock:
            return len(self._faces)

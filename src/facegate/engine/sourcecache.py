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
from collections.abc import Callable, Hashable

from facegate.engine.oncecache import OnceCache
from facegate.engine.types import Face, FloatArray

DEFAULT_ENTRIES = 64


class SourceFaceCache(OnceCache[list[Face]]):
    """The faces an analyser found in source images, by key; and the recogniser's
    descriptor of each, for the quality reports (``descriptor``)."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES) -> None:
        super().__init__(max_entries)
        self.descriptors: OnceCache[FloatArray] = OnceCache(4 * max_entries)

    def descriptor(self, key: Hashable, describe: Callable[[], FloatArray]) -> FloatArray:
        """The recogniser's descriptor of one source face (``key``: the image's key and the
        face's place in it), made by ``describe()`` on first use (a read-only array)."""
        return self.descriptors.get(key, describe)

    def faces(self, key: Hashable, analyse: Callable[[], list[Face]]) -> list[Face]:
        """A copy of the faces of the image ``key`` names, analysed by ``analyse()`` on
        first use."""
        return copy.deepcopy(self.get(key, analyse))

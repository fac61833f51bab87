"""Values computed once per key and kept: bounded (least recently used go first),
thread-safe, and one computation per key at a time — threads asking for a key being
computed wait for that computation instead of repeating it. A computation that raises
leaves nothing; the next caller computes again.

The caller keeps what it stores immutable, or copies what it reads (``SourceFaceCache``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class OnceCache(Generic[V]):
    """``get(key, compute)``: the value of ``key``, computed by ``compute()`` on first use."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max(1, max_entries)
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        self._busy: dict[Hashable, threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        with self._lock:
            if key in self._values:
                return self._hit(key)
            busy = self._busy.setdefault(key, threading.Lock())
        with busy:  # one computation per key; the others wait for it, then read it
            with self._lock:
                if key in self._values:
                    return self._hit(key)
                self.misses += 1
            try:
                value = compute()
            except BaseException:
                with self._lock:
                    self._busy.pop(key, None)
                raise
            # Kept before the key stops being busy: a caller arriving in between would
            # otherwise find neither and compute it again.
            with self._lock:
                self._values[key] = value
                self._values.move_to_end(key)
                while len(self._values) > self.max_entries:
                    self._values.popitem(last=False)
                self._busy.pop(key, None)
            return value

    def forget(self, where: Callable[[Hashable], bool]) -> int:
        """Drop the kept values whose key ``where`` accepts (an erasure: the service's
        source cache is keyed by tenant); how many."""
        with self._lock:
            doomed = [key for key in self._values if where(key)]
            for key in doomed:
                del self._values[key]
        return len(doomed)

    def _hit(self, key: Hashable) -> V:
        """The kept value of ``key``; the caller holds the lock."""
        self._values.move_to_end(key)
        self.hits += 1
        return self._values[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

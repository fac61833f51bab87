"""Processor names → classes, and one shared instance of each per registry.

Instances hold only read-only things (loaded models), so one per engine runtime serves every
job and tenant; everything per job travels in ``JobContext``. Classes are imported lazily so a
pipeline that uses only ``face_debugger`` never loads a swapper's models.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from facegate.engine.errors import InvalidOptions
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.processors.base import Processor

# name -> "module:Class"
PROCESSORS: Mapping[str, str] = MappingProxyType(
    {
        "face_swapper": "facegate.engine.processors.face_swapper:FaceSwapper",
        "face_debugger": "facegate.engine.processors.face_debugger:FaceDebugger",
        "face_enhancer": "facegate.engine.processors.face_enhancer:FaceEnhancer",
        "frame_enhancer": "facegate.engine.processors.frame_enhancer:FrameEnhancer",
        "age_modifier": "facegate.engine.processors.age_modifier:AgeModifier",
        "expression_restorer": "facegate.engine.processors.expression_restorer:ExpressionRestorer",
    }
)


def processor_class(name: str, table: Mapping[str, str] = PROCESSORS) -> type[Processor[Any]]:
    """The class ``table`` names for a processor, imported without creating it (no models
    are loaded)."""
    target = table.get(name)
    if target is None:
        raise InvalidOptions(f"unknown processor {name!r} (known: {', '.join(sorted(table))})")
    module_name, attr = target.split(":")
    cls = getattr(importlib.import_module(module_name), attr)
    assert isinstance(cls, type)
    assert issubclass(cls, Processor)
    return cls


def sensitive_processors(names: Iterable[str] | None = None) -> list[str]:
    """The processors that declare ``sensitive = True`` (of ``names``, or all), sorted.

    The one list of sensitive features: the audit (jobs using them), the consent policy and
    the console (``/v1/capabilities``) all read it from here."""
    wanted = PROCESSORS if names is None else [n for n in set(names) if n in PROCESSORS]
    return sorted(name for name in wanted if processor_class(name).sensitive)


class ProcessorRegistry:
    """Creates each processor once (thread-safe) and hands out the shared instance."""

    def __init__(self, hub: ModelHub, table: dict[str, str] | None = None) -> None:
        self.hub = hub
        self._table = dict(PROCESSORS if table is None else table)
        self._instances: dict[str, Processor[Any]] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return sorted(self._table)

    def get(self, name: str) -> Processor[Any]:
        cls = processor_class(name, self._table)
        with self._lock:
            instance = self._instances.get(name)
            if instance is None:
                instance = cls(self.hub)
                instance.check_models()
                self._instances[name] = instance
            return instance

    def release_all(self) -> None:
        with self._lock:
            for instance in self._instances.values():
                instance.release()
            self._instances.clear()

"""``import mediapipe`` without paying at start-up for the parts the engine never calls.

mediapipe 0.10.21's package ``__init__`` imports every solution with its drawing helpers
(``drawing_utils`` imports ``matplotlib.pyplot``: ~0.5 s) and the whole Tasks API (~0.1 s),
though the engine runs only the face detection, face mesh and hands graphs (and the other
solutions' modules, ~0.1 s more, nothing here either): a third of
``facegate swap``'s cold start (issue 28). So, before mediapipe is first imported, those
modules are put in ``sys.modules`` as :class:`DeferredModule`: the real module, whose code
runs at the first access to an attribute it defines. Whoever uses them (``mp.tasks``,
``mp.solutions.drawing_utils``) gets exactly what a plain import gives; until then they
cost nothing. (``importlib.util.LazyLoader`` does not serve: the import system reads each
module's ``__spec__`` on the way, which makes it load at once.)

Every engine module that uses mediapipe imports it from here.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

#: The modules mediapipe's ``__init__`` imports that the engine does not use (it runs the
#: face_detection, face_mesh and hands solutions).
DEFERRED = (
    "mediapipe.python.solutions.drawing_utils",
    "mediapipe.python.solutions.drawing_styles",
    "mediapipe.python.solutions.holistic",
    "mediapipe.python.solutions.objectron",
    "mediapipe.python.solutions.pose",
    "mediapipe.python.solutions.selfie_segmentation",
    "mediapipe.tasks.python",
)
_LOCK_ATTRIBUTE = "__facegate_deferred_lock__"
_RUNNING_ATTRIBUTE = "__facegate_deferred_running__"


class DeferredModule(ModuleType):
    """A module whose code runs at the first access to a name it lacks (its own names
    among them), then an ordinary module."""

    def __getattr__(self, name: str) -> Any:
        lock: threading.RLock | None = self.__dict__.get(_LOCK_ATTRIBUTE)
        if lock is not None:
            with lock:  # another thread's first access waits for the code to have run
                # (re-entered while the code runs, from its own imports: no second run)
                if type(self) is DeferredModule and not self.__dict__.get(_RUNNING_ATTRIBUTE):
                    self.__dict__[_RUNNING_ATTRIBUTE] = True
                    spec = self.__spec__
                    assert spec is not None
                    assert spec.loader is not None
                    spec.loader.exec_module(self)
                    self.__class__ = ModuleType  # type: ignore[assignment]  # ordinary from now on
                    del self.__dict__[_RUNNING_ATTRIBUTE]
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None


def _module_of(name: str, root: Path) -> ModuleType:
    """The module ``name`` of the package at ``root``, found without importing its parents
    (which would run mediapipe's ``__init__``), its code not run yet."""
    folder = root.joinpath(*name.split(".")[1:-1])
    spec = importlib.machinery.PathFinder.find_spec(name, [str(folder)])
    if spec is None or spec.loader is None:
        raise ImportError(f"no module {name} in the installed mediapipe", name=name)
    return importlib.util.module_from_spec(spec)


def _defer_unused_parts() -> None:
    found = importlib.util.find_spec("mediapipe")  # finds, imports nothing
    if found is None or not found.submodule_search_locations:
        return  # not installed: the import below says so
    root = Path(next(iter(found.submodule_search_locations)))
    # The Tasks package itself (its __init__ is empty) is imported for real, so that
    # mediapipe's ``import mediapipe.tasks.python as tasks`` finds it.
    tasks = _module_of("mediapipe.tasks", root)
    sys.modules["mediapipe.tasks"] = tasks
    assert tasks.__spec__ is not None
    assert tasks.__spec__.loader is not None
    tasks.__spec__.loader.exec_module(tasks)
    for name in DEFERRED:
        module = _module_of(name, root)
        module.__dict__[_LOCK_ATTRIBUTE] = threading.RLock()
        module.__class__ = DeferredModule
        sys.modules[name] = module


def import_mediapipe() -> ModuleType:
    """mediapipe, imported with :data:`DEFERRED` deferred when this is its first import."""
    if "mediapipe" not in sys.modules:
        _defer_unused_parts()
    mediapipe = importlib.import_module("mediapipe")
    # ``import a.b.c`` binds ``c`` on ``a.b`` only when it loads it: bind what was deferred.
    for name in DEFERRED:
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and name in sys.modules:
            setattr(sys.modules[parent], child, sys.modules[name])
    return mediapipe


mp = import_mediapipe()
solutions: Any = mp.solutions

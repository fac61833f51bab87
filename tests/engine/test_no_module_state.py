"""The engine keeps no process-wide mutable state: what it loads lives on an EngineRuntime.

Every module of ``facegate.engine`` is imported and each name it binds at module level is
checked: containers must be immutable (tuple, frozenset, MappingProxyType), arrays read-only,
no caches (``functools.cache``/``lru_cache``), locks or thread-locals, and no ``global``
statement anywhere. Tables of constants stay possible, frozen.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import importlib
import pkgutil
import sys
import threading
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import numpy as np
import pytest

import facegate.engine

#: module.name -> why it may hold process state. A cache of a process-wide side effect only.
ALLOWED = {
    # Loads the CUDA libraries into the process once: the state is the process's own.
    "facegate.engine.modelstore.inference.load_cuda_libraries": "loads shared libraries once",
}

MUTABLE = (
    dict,
    list,
    set,
    bytearray,
    collections.deque,
    collections.OrderedDict,
    collections.defaultdict,
)
LOCKS = (type(threading.Lock()), type(threading.RLock()), threading.local, threading.Event)


def engine_modules() -> list[ModuleType]:
    found = [facegate.engine]
    for info in pkgutil.walk_packages(facegate.engine.__path__, "facegate.engine."):
        found.append(importlib.import_module(info.name))
    return found


def module_level_names(module: ModuleType) -> set[str]:
    """Names the module's own code binds at module level (not those it imports)."""
    tree = ast.parse(Path(str(module.__file__)).read_text())
    names: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    names.add(leaf.id)
    return names


def problem(value: Any) -> str | None:
    if isinstance(value, MappingProxyType | tuple | frozenset):
        inner = value.values() if isinstance(value, MappingProxyType) else value
        return next((f"holds {why}" for item in inner if (why := problem(item))), None)
    if isinstance(value, MUTABLE):
        return f"a mutable {type(value).__name__} (use a tuple, frozenset or MappingProxyType)"
    if isinstance(value, np.ndarray) and value.flags.writeable:
        return "a writeable array (call .setflags(write=False))"
    if isinstance(value, LOCKS):
        return "a lock or thread-local (state belongs on the runtime's objects)"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not value.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            return "an instance of a dataclass that is not frozen"
    if hasattr(value, "cache_info"):
        return "a cached function (cache on an object the runtime owns)"
    return None


def offenders(modules: list[ModuleType]) -> list[str]:
    found: list[str] = []
    for module in modules:
        for name in sorted(module_level_names(module)):
            if name == "__all__" or f"{module.__name__}.{name}" in ALLOWED:
                continue
            why = problem(getattr(module, name, None))
            if why is not None:
                found.append(f"{module.__name__}.{name}: {why}")
        tree = ast.parse(Path(str(module.__file__)).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found.append(f"{module.__name__}:{node.lineno}: global {', '.join(node.names)}")
    return found


def load(folder: Path, name: str, source: str) -> ModuleType:
    """``source`` as the module ``facegate.engine.<name>`` (a file in ``folder``)."""
    path = folder / f"{name}.py"
    path.write_text(source)
    module = ModuleType(f"facegate.engine.{name}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module


def test_the_engine_has_no_module_level_mutable_state() -> None:
    modules = engine_modules()
    assert len(modules) > 40  # the walk found the engine
    assert offenders(modules) == []


@pytest.mark.parametrize(
    "source",
    [
        "CACHE: dict[str, int] = {}\n",
        "SEEN = []\n",
        "import threading\nLOCK = threading.Lock()\n",
        "import functools\n@functools.cache\ndef loaded() -> int:\n    return 1\n",
        "import numpy as np\nTABLE = np.zeros(3)\n",
        "from types import MappingProxyType\nTABLE = MappingProxyType({'a': [1]})\n",
        "_x = None\ndef f() -> None:\n    global _x\n    _x = 1\n",
        "from dataclasses import dataclass\n@dataclass\nclass C:\n    n: int = 0\nSTATE = C()\n",
    ],
)
def test_each_kind_of_state_is_caught(source: str, tmp_path: Path) -> None:
    assert len(offenders([load(tmp_path, "stateful", source)])) == 1


def test_frozen_tables_pass(tmp_path: Path) -> None:
    source = (
        "from types import MappingProxyType\nimport numpy as np\n"
        "TABLE = MappingProxyType({'a': 1})\nNAMES = frozenset({'a'})\nORDER = (1, 2)\n"
        "ARRAY = np.zeros(3)\nARRAY.setflags(write=False)\n"
    )
    assert offenders([load(tmp_path, "frozen", source)]) == []

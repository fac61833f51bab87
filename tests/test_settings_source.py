"""``FACEGATE_*`` variables are read through ``Settings`` only (``facegate/settings.py``).

Read ``ast``-wise: ``os.getenv(K)``, ``os.environ.get/setdefault/pop(K)``, ``os.environ[K]``
as a value, ``K in os.environ`` and click's ``envvar=K``, where ``K`` is a ``FACEGATE_*``
string or a module-level name bound to one. Writing one (``os.environ[K] = v``, for child
processes) is not reading it. ``deploy/env.py`` translates the specification's names into
``FACEGATE_*`` before ``Settings`` reads them (it must see an explicit value to refuse a
contradiction).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "facegate"
PREFIX = "FACEGATE_"
ALLOWED = {"settings.py", "deploy/env.py"}
READ_METHODS = {"get", "getenv", "setdefault", "pop"}


def _is_environ(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return text == "environ" or text.endswith(".environ")


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "string"`` bindings."""
    bound: dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AnnAssign):
            value = statement.value
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                for target in targets:
                    if isinstance(target, ast.Name):
                        bound[target.id] = value.value
    return bound


def _keys(node: ast.expr | None, bound: dict[str, str]) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in bound:
        return [bound[node.id]]
    if isinstance(node, ast.List | ast.Tuple):
        return [key for item in node.elts for key in _keys(item, bound)]
    return []


def environment_reads(source: str) -> list[tuple[int, str]]:
    """(line, variable) of every read of a ``FACEGATE_*`` variable in ``source``."""
    tree = ast.parse(source)
    bound = _constants(tree)
    reads: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        keys: list[str] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if node.func.attr in READ_METHODS and (
                _is_environ(owner) or ast.unparse(owner) == "os"
            ):
                keys = _keys(node.args[0] if node.args else None, bound)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if _is_environ(node.value):
                keys = _keys(node.slice, bound)
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, ast.In | ast.NotIn) for op in node.ops
        ):
            if any(_is_environ(comparator) for comparator in node.comparators):
                keys = _keys(node.left, bound)
        elif isinstance(node, ast.keyword) and node.arg == "envvar":
            keys = _keys(node.value, bound)
        line = getattr(node, "lineno", 0)
        reads += [(line, key) for key in keys if key.startswith(PREFIX)]
    return reads


def readers() -> dict[str, list[tuple[int, str]]]:
    found: dict[str, list[tuple[int, str]]] = {}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        reads = environment_reads(path.read_text())
        if reads and relative not in ALLOWED:
            found[relative] = reads
    return found


def test_facegate_variables_are_read_only_through_settings() -> None:
    found = readers()
    assert found == {}


def test_every_kind_of_read_is_caught() -> None:
    source = (
        "import os\n"
        "from os import environ\n"
        'KEEP = "FACEGATE_NATIVE_LOGS"\n'
        'a = os.getenv("FACEGATE_A")\n'
        'b = os.environ.get("FACEGATE_B", "x")\n'
        "c = os.environ[KEEP]\n"
        'd = "FACEGATE_D" in environ\n'
        'os.environ.setdefault("FACEGATE_E", "1")\n'
        '@click.option("--f", envvar=["FACEGATE_F", "OTHER"])\n'
        "def f(): ...\n"
        'os.environ["FACEGATE_WORKERS"] = "0"\n'
        'g = os.environ.get("OMP_WAIT_POLICY")\n'
        'help = "default: FACEGATE_PORT"\n'
    )
    assert sorted(environment_reads(source)) == [
        (4, "FACEGATE_A"),
        (5, "FACEGATE_B"),
        (6, "FACEGATE_NATIVE_LOGS"),
        (7, "FACEGATE_D"),
        (8, "FACEGATE_E"),
        (9, "FACEGATE_F"),
    ]

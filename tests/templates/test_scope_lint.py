"""Lint: every query of the tenant-owned studio tables (job templates, library faces,
batches) starts from its repository's tenant-scoped statement. Outside that repository no
module builds a statement on the table's class; inside it, only the scoped starters do,
and an ``update`` only filtered by a scoped statement's ``whereclause``."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "facegate"
BUILDERS = {"select", "update", "delete", "get", "get_one", "query"}
# table class -> (its repository module, the functions that may start a statement on it)
SCOPED: dict[str, tuple[str, set[str]]] = {
    "JobTemplate": ("templates/repository.py", {"readable_statement"}),
    "LibraryFace": ("library/repository.py", {"readable_statement"}),
    "Batch": ("batches/repository.py", {"readable_statement"}),
    "BatchItem": ("batches/repository.py", {"readable_items"}),
}


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(inner, ast.Name) and inner.id == name for inner in ast.walk(node))


def statements(tree: ast.AST) -> list[tuple[str, str, str, int, bool]]:
    """(table class, builder, enclosing function, line, whether that function filters by a
    ``whereclause``) of every statement builder called with a scoped table's class in its
    arguments."""
    found: list[tuple[str, str, str, int, bool]] = []

    def visit(node: ast.AST, function: str, filtered: bool = False) -> None:
        for child in ast.iter_child_nodes(node):
            name, scoped = function, filtered
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name, scoped = child.name, ".whereclause" in ast.unparse(child)
            if isinstance(child, ast.Call):
                func = child.func
                builder = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else None
                )
                if builder in BUILDERS:
                    for table in SCOPED:
                        if any(_mentions(arg, table) for arg in child.args):
                            found.append((table, builder, name, child.lineno, scoped))
            visit(child, name, scoped)

    visit(tree, "<module>")
    return found


def violations_in(relative: str, tree: ast.AST) -> list[str]:
    problems = []
    for table, builder, function, line, filtered in statements(tree):
        repository, starters = SCOPED[table]
        where = f"{relative}:{line} in {function}()"
        if relative != repository:
            problems.append(f"{where}: {builder}({table}...) outside {repository}")
        elif builder == "update" and filtered:
            continue
        elif function not in starters:
            problems.append(f"{where}: {builder}({table}...) bypasses {sorted(starters)}")
    return problems


def test_no_query_of_a_studio_table_bypasses_its_scoped_statement() -> None:
    problems: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith("migrations/"):
            continue
        problems += violations_in(relative, ast.parse(path.read_text()))
    assert problems == []


def test_the_lint_catches_a_bypass() -> None:
    bad = ast.parse(
        "def handler(session, template_id):\n"
        "    return session.get(JobTemplate, template_id)\n"
        "def listing(session):\n"
        "    return session.scalars(select(LibraryFace).where(LibraryFace.name == 'x'))\n"
    )
    assert len(violations_in("api/somewhere.py", bad)) == 2
    inside = ast.parse(
        "def by_name(session):\n"
        "    return select(JobTemplate)\n"
        "def rename(session, scoped):\n"
        "    return update(JobTemplate).where(scoped.whereclause)\n"
    )
    assert violations_in("templates/repository.py", inside) == [
        "templates/repository.py:2 in by_name(): select(JobTemplate...) bypasses "
        "['readable_statement']"
    ]

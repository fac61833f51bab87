"""Lint: every query of the tenant-owned ``jobs`` table goes through the scoped repository.

Outside the allow-list below, no module may build a statement on ``Job`` (``select(Job)``,
``update(Job)``, ``delete(Job)``, ``session.get(Job, ...)``, ``select(Job.x)``...). Inside
``repository.py`` only ``readable_statement`` and ``operator_statement`` may start one,
and ``update(Job)`` must be filtered by a scoped statement's ``whereclause``. The scheduler
modules (claim, leases) act by job id across tenants by design and serve no request.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "facegate"
# jobs/gauges.py: cross-tenant counts for /metrics (no rows leave it).
SCHEDULER_MODULES = {"queue/claim.py", "queue/leases.py", "jobs/gauges.py"}
STATEMENT_BUILDERS = {"select", "update", "delete", "get", "get_one", "query", "scalars"}
REPOSITORY_STARTERS = {"readable_statement", "operator_statement"}


def _mentions_job(node: ast.AST) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id == "Job":
            return True
    return False


def _builder_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def job_statements(tree: ast.AST) -> list[tuple[ast.Call, str]]:
    """(call, enclosing function) of every statement builder called with Job in its args."""
    found: list[tuple[ast.Call, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if (
                isinstance(child, ast.Call)
                and _builder_name(child) in STATEMENT_BUILDERS
                and any(_mentions_job(arg) for arg in child.args)
            ):
                found.append((child, name))
            visit(child, name)

    visit(tree, "<module>")
    return found


def violations() -> list[str]:
    problems: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative in SCHEDULER_MODULES or relative.startswith("migrations/"):
            continue
        source = path.read_text()
        tree = ast.parse(source)
        for call, function in job_statements(tree):
            where = f"{relative}:{call.lineno} in {function}()"
            builder = _builder_name(call)
            if relative != "jobs/repository.py":
                problems.append(f"{where}: {builder}(Job...) outside the jobs repository")
            elif builder == "update":
                segment = ast.get_source_segment(source, _statement_of(tree, call)) or ""
                if "whereclause" not in segment:
                    problems.append(f"{where}: update(Job) not filtered by a scoped statement")
            elif function not in REPOSITORY_STARTERS:
                problems.append(f"{where}: {builder}(Job...) bypasses readable_statement()")
    return problems


def _statement_of(tree: ast.AST, call: ast.Call) -> ast.AST:
    """The smallest enclosing simple statement of ``call`` (the whole chained expression)."""
    best: ast.AST = call
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, ast.FunctionDef | ast.ClassDef):
            if any(inner is call for inner in ast.walk(node)):
                if best is call or (
                    node.lineno >= best.lineno  # type: ignore[attr-defined]
                ):
                    best = node
    return best


def test_no_job_query_bypasses_the_scoped_repository() -> None:
    assert violations() == []


def test_the_lint_catches_a_bypass() -> None:
    bad = ast.parse(
        "from facegate.jobs.tables import Job\n"
        "def handler(session, job_id):\n"
        "    return session.get(Job, job_id)\n"
        "def other(session):\n"
        "    return session.scalars(select(Job.id).where(Job.status == 'queued'))\n"
    )
    names = sorted((_builder_name(call), fn) for call, fn in job_statements(bad))
    assert ("get", "handler") in names
    assert ("select", "other") in names

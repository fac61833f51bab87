"""Lint: every query of a tenant-owned table starts from its repository's scoped statement.

Outside the table's repository no module builds a statement on the table's class
(``select(Job)``, ``select(Job.id)``, ``update(...)``, ``delete(...)``, ``session.get(...)``);
inside it only the listed starters do, and an ``update``/``delete`` only in a function that
filters by a scoped statement's ``whereclause``. The starters are the tenant-scoped
statement (``readable_statement(tenant)`` and its kin) and, named here with the reason, the
few cross-tenant reads a process makes by design. Every mapped class with a ``tenant_id``
column must be listed, so a new table cannot escape the lint.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from sqlalchemy import select

from facegate.database import Base
from facegate.jobs.repository import JOB_VIEW, ONE_JOB, JobRepository
from facegate.jobs.tables import Job

SRC = Path(__file__).resolve().parents[1] / "src" / "facegate"
BUILDERS = {"select", "update", "delete", "get", "get_one", "query"}
SCOPED_WRITES = {"update", "delete"}
# table class -> (its repository module, the functions that may start a statement on it)
SCOPED: dict[str, tuple[str, set[str]]] = {
    # operator_statement: the admin's and the exporter's reads across tenants;
    # parts_statement: the scheduler's parts of one job of the tenant (its cancel).
    "Job": ("jobs/repository.py", {"readable_statement", "operator_statement", "parts_statement"}),
    "StoredObject": ("storage/repository.py", {"readable_statement"}),
    "UsageRecord": ("usage/repository.py", {"readable_statement"}),
    # scan: the hash chain's verification walks every event.
    "AuditEvent": ("observability/audit/repository.py", {"readable_statement", "scan"}),
    # Authentication reads and touches a key by the id the caller presented (no tenant yet).
    "ApiKey": (
        "tenancy/repository.py",
        {"keys_of", "get_key_for_authentication", "touch_key"},
    ),
    # retention_days: the purge runs across tenants. policy_stamp: one tenant's, by the
    # bound tenant id (a submission's check of its cached policy).
    "Policy": ("tenancy/repository.py", {"policy_of", "retention_days", "policy_stamp"}),
    "Tenant": (
        "tenancy/repository.py",
        {"get_tenant", "list_tenants", "get_key_for_authentication", "policy_stamp"},
    ),
    "LibraryFace": ("library/repository.py", {"readable_statement"}),
    "JobTemplate": ("templates/repository.py", {"readable_statement"}),
    "Batch": ("batches/repository.py", {"readable_statement"}),
    "BatchItem": ("batches/repository.py", {"readable_items"}),
    # The dispatcher fans out events and sends due deliveries of every tenant.
    "WebhookEndpoint": ("webhooks/repository.py", {"readable_endpoints", "endpoint_by_id"}),
    "WebhookEvent": ("webhooks/repository.py", {"take_events", "drop_events"}),
    "WebhookDelivery": (
        "webhooks/repository.py",
        {"readable_deliveries", "due_tenants", "delivery"},
    ),
    "ConsentAttestation": ("consent/repository.py", {"readable_statement"}),
    # The platform admin's case queue and the takedown clock read every case; a tenant's
    # admin its own. (A tenant's erasure and export walk every table with a tenant_id
    # through the metadata, by design: takedown/erasure.py, takedown/export.py.)
    "TakedownCase": ("takedown/repository.py", {"readable_statement", "platform_statement"}),
    "TakedownMatch": ("takedown/repository.py", {"matches_statement"}),
    "TakedownRemoval": ("takedown/repository.py", {"removals_of"}),
    # A source is checked against its tenant's blocks and the platform's.
    "TakedownBlock": ("takedown/repository.py", {"blocks_for"}),
    # Tracing a file looks its mark up by what the file carries, whoever made it.
    # A tenant's open streams (its cap), its streams, one of them, and a stop asked of one
    # (all by the tenant's id); the process running a stream beats and ends its own row
    # and reads whether a stop was asked of it (by the id it opened); the sweep ends any
    # tenant's stream whose process stopped beating (as the scheduler reaps leases); the
    # end of a row just ended is announced (by that id).
    "LiveStreamRow": (
        "streams/service.py",
        {
            "hold_open_streams",
            "stream_row",
            "tenant_streams",
            "request_stop",
            "stop_problem",
            "checkpoint",
            "_mark_ended",
            "announce_end",
            "sweep_lost_streams",
        },
    ),
    "ProvenanceMark": (
        "provenance/repository.py",
        {"readable_statement", "by_serial", "by_reference"},
    ),
}
# The scheduler and the queue metrics act across tenants by design and serve no request.
SCHEDULER: dict[str, set[str]] = {
    "queue/claim.py": {"Job", "Policy", "Tenant"},
    "queue/leases.py": {"Job"},
    "queue/segments.py": {"Job"},
    "jobs/gauges.py": {"Job"},
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
        if table in SCHEDULER.get(relative, set()):
            continue
        if relative != repository:
            problems.append(f"{where}: {builder}({table}...) outside {repository}")
        elif builder in SCOPED_WRITES and filtered:
            continue
        elif function not in starters:
            problems.append(f"{where}: {builder}({table}...) bypasses {sorted(starters)}")
    return problems


def test_no_query_of_a_tenant_owned_table_bypasses_its_scoped_statement() -> None:
    problems: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith("migrations/"):
            continue
        problems += violations_in(relative, ast.parse(path.read_text()))
    assert problems == []


def test_every_table_with_a_tenant_is_linted() -> None:
    for path in sorted(SRC.rglob("tables.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        importlib.import_module(module)
    owned = {
        mapper.class_.__name__
        for mapper in Base.registry.mappers
        if "tenant_id" in mapper.columns and mapper.class_.__module__.startswith("facegate.")
    }
    assert len(owned) >= 15
    assert owned - set(SCOPED) == set()


def test_the_lint_catches_a_bypass() -> None:
    bad = ast.parse(
        "from facegate.jobs.tables import Job\n"
        "def handler(session, job_id):\n"
        "    return session.get(Job, job_id)\n"
        "def usage(session, tenant):\n"
        "    return select(func.sum(StoredObject.size_bytes)).where(StoredObject.kind == 'x')\n"
        "def listing(session):\n"
        "    return session.scalars(select(LibraryFace).where(LibraryFace.name == 'x'))\n"
        "def limits(session):\n"
        "    return session.get(Policy, 'acme')\n"
    )
    assert violations_in("worker/pool.py", bad) == [
        "worker/pool.py:3 in handler(): get(Job...) outside jobs/repository.py",
        "worker/pool.py:5 in usage(): select(StoredObject...) outside storage/repository.py",
        "worker/pool.py:7 in listing(): select(LibraryFace...) outside library/repository.py",
        "worker/pool.py:9 in limits(): get(Policy...) outside tenancy/repository.py",
    ]
    assert violations_in("queue/claim.py", bad) == [
        "queue/claim.py:5 in usage(): select(StoredObject...) outside storage/repository.py",
        "queue/claim.py:7 in listing(): select(LibraryFace...) outside library/repository.py",
    ]
    inside = ast.parse(
        "def by_name(session):\n"
        "    return select(StoredObject)\n"
        "def drop(session, tenant, keys):\n"
        "    scoped = StoredObjectRepository.readable_statement(tenant)\n"
        "    return delete(StoredObject).where(scoped.whereclause, StoredObject.key.in_(keys))\n"
        "def drop_all(session):\n"
        "    return delete(StoredObject)\n"
    )
    assert violations_in("storage/repository.py", inside) == [
        "storage/repository.py:2 in by_name(): select(StoredObject...) bypasses "
        "['readable_statement']",
        "storage/repository.py:7 in drop_all(): delete(StoredObject...) bypasses "
        "['readable_statement']",
    ]


def test_no_tenant_facing_statement_of_jobs_returns_a_part() -> None:
    """The parts of a segmented job (rows with a parent) are the scheduler's: every
    statement a tenant or an operator reads jobs through leaves them out."""
    statements = {
        "readable_statement": JobRepository.readable_statement("t"),
        "operator_statement": JobRepository.operator_statement(),
        "ONE_JOB": ONE_JOB,
        "JOB_VIEW": JOB_VIEW,
    }
    for name, statement in statements.items():
        assert "jobs.parent_id IS NULL" in str(statement), name
    # and the check sees a statement that forgot it
    assert "jobs.parent_id IS NULL" not in str(select(Job).where(Job.tenant_id == "t"))

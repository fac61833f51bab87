"""The bounded tenant label, multiprocess exposition, the sensitive-processor audit."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from facegate.database import create_session_factory, session_scope
from facegate.jobs.models import Job
from facegate.observability.audit.repository import AuditRepository
from facegate.observability.jobs import audit_submission
from facegate.observability.labels import OTHER, TenantLabels
from facegate.tenancy.principal import Principal

CHILD = """
import sys
from facegate.observability import metrics
metrics.job_submitted(sys.argv[1], "image")
"""
EXPOSE = """
from facegate.observability.metrics import exposition
print(exposition()[0].decode())
"""


def test_tenant_label_is_capped() -> None:
    labels = TenantLabels(cap=2)
    assert [labels(t) for t in ("a", "b", "c", "a", None)] == ["a", "b", OTHER, "a", OTHER]
    assert TenantLabels(cap=0)("a") == OTHER


def test_multiprocess_mode_merges_processes(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for tenant in ("acme", "acme", "beta"):
        subprocess.run([sys.executable, "-c", CHILD, tenant], env=env, check=True)
    out = subprocess.run(
        [sys.executable, "-c", EXPOSE], env=env, check=True, capture_output=True, text=True
    ).stdout
    values = {
        sample.labels.get("tenant"): sample.value
        for family in text_string_to_metric_families(out)
        if family.name == "facegate_jobs_submitted"
        for sample in family.samples
        if sample.name == "facegate_jobs_submitted_total"
    }
    assert values == {"acme": 2.0, "beta": 1.0}


def test_sensitive_processors_are_audited(database: Any) -> None:
    principal = Principal("acme", frozenset({"jobs:write"}), "key:k1")
    with session_scope(create_session_factory(database.engine)) as session:
        hashes = {"source-0": "a" * 64, "target": "b" * 64}
        for processors in (["face_debugger"], ["face_swapper", "age_modifier", "face_enhancer"]):
            job = Job(
                id=uuid.uuid4(), tenant_id="acme", kind="image", spec={"processors": processors}
            )
            audit_submission(session, principal, job, hashes)
        events = AuditRepository(session).list("acme")
    assert [(e.action, e.details["processors"], e.actor, e.tenant_id) for e in events] == [
        ("job.sensitive_processors", ["age_modifier", "face_swapper"], "key:k1", "acme")
    ]
    assert events[0].details["inputs"] == hashes

"""The bounded tenant label, multiprocess exposition, the sensitive-processor audit."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from facegate.database import create_session_factory, session_scope
from facegate.jobs.observe import audit_submission
from facegate.jobs.tables import Job
from facegate.observability import multiproc
from facegate.observability.audit.repository import AuditRepository
from facegate.observability.labels import OTHER, TenantLabels
from facegate.principal import Principal

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
    # A folder that does not exist yet, as in a container whose /tmp is a fresh emptyDir:
    # importing facegate creates it (it used to fail with FileNotFoundError).
    folder = tmp_path / "fresh-tmp" / "metrics"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
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
    assert folder.stat().st_mode & 0o777 == 0o700


def test_multiprocess_folder_is_prepared_only_when_asked(tmp_path: Path) -> None:
    assert multiproc.prepare({}) is None
    legacy = tmp_path / "legacy"
    assert multiproc.prepare({"prometheus_multiproc_dir": str(legacy)}) == legacy
    assert legacy.is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match=r"PROMETHEUS_MULTIPROC_DIR=.*cannot create"):
        multiproc.prepare({"PROMETHEUS_MULTIPROC_DIR": str(blocker / "metrics")})


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

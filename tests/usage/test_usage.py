"""Usage records: idempotent on the job id, summed per tenant and day, exported as
CloudEvents / CSV by ``facegate usage export`` (SQLite and PostgreSQL)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from facegate.cli import main
from facegate.database import create_session_factory, session_scope
from facegate.jobs.tables import Job
from facegate.usage.service import Consumption, record_job_usage, summarise

DAY1 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


def make_job(tenant_id: str, **spec: Any) -> Job:
    job = Job(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        kind="image",
        status="running",
        spec={"processors": ["face_swapper"], **spec},
        created_at=DAY1 - timedelta(seconds=3),
        started_at=DAY1 - timedelta(seconds=1),
    )
    return job


def consumption(pixels: int) -> Consumption:
    return Consumption(
        compute_seconds=1.5,
        device="cpu",
        frames=1,
        input_pixels=pixels * 2,
        output_pixels=pixels,
        input_bytes=100,
        output_bytes=50,
    )


def record(database: Any, job: Job, pixels: int, finished: datetime) -> bool:
    with session_scope(create_session_factory(database.engine)) as session:
        return record_job_usage(session, job, "succeeded", consumption(pixels), finished)


def test_one_record_per_job_and_daily_sums(database: Any) -> None:
    a1 = make_job("acme", processor_options={"face_swapper": {"model": "inswapper_128"}})
    a2, b1 = make_job("acme"), make_job("beta")
    assert record(database, a1, 1000, DAY1)
    assert not record(database, a1, 1000, DAY1)  # the same job again: not billed twice
    assert record(database, a2, 500, DAY1 + timedelta(days=1))
    assert record(database, b1, 7, DAY1)
    with session_scope(create_session_factory(database.engine)) as session:
        acme_days = summarise(session, "acme", None, None, "day")
        everyone = summarise(session, None, DAY1, DAY1 + timedelta(hours=1), "total")
    assert [(row["day"], row["jobs"], row["output_pixels"]) for row in acme_days] == [
        ("2025-03-01", 1, 1000),
        ("2025-03-02", 1, 500),
    ]
    assert acme_days[0]["compute_seconds"] == 1.5
    assert acme_days[0]["queue_wait_seconds"] == 2.0
    assert {row["tenant_id"]: row["output_pixels"] for row in everyone} == {"acme": 1000, "beta": 7}


def test_export_cloudevents_and_csv(database: Any) -> None:
    job = make_job("acme", processor_options={"face_swapper": {"model": "inswapper_128"}})
    record(database, job, 1000, DAY1)
    record(database, make_job("beta"), 7, DAY1)
    runner = CliRunner()
    args = ["usage", "export", "--database-url", database.url, "--tenant", "acme"]
    as_json = runner.invoke(main, [*args, "--format", "json", "-o", "-"])
    assert as_json.exit_code == 0, as_json.output
    (event,) = json.loads(as_json.stdout)  # "-o -" is standard output, never a file "-"
    assert "1 usage records of tenant acme" in as_json.stderr
    assert event["specversion"] == "1.0"
    assert event["id"] == str(job.id)
    assert event["type"] == "com.facegate.job.usage"
    assert event["subject"] == "acme"
    assert event["time"] == "2025-03-01T10:00:00Z"
    assert event["data"]["output_pixels"] == 1000
    assert event["data"]["model_variant"] == "face_swapper=inswapper_128"
    as_csv = runner.invoke(main, [*args[:-2], "--format", "csv", "--from", "2025-03-01"])
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert sorted(row["subject"] for row in rows) == ["acme", "beta"]
    assert {row["output_pixels"] for row in rows} == {"1000", "7"}
    empty = runner.invoke(main, [*args, "--format", "ndjson", "--from", "2025-03-02"])
    assert empty.stdout == ""
    assert empty.stderr.startswith("no usage records of tenant acme from 2025-03-02 00:00 UTC")


def test_export_to_a_file_says_where_and_refuses_a_backwards_range(
    database: Any, tmp_path: Path
) -> None:
    record(database, make_job("acme"), 1000, DAY1)
    runner = CliRunner()
    out = tmp_path / "march.json"
    args = ["usage", "export", "--database-url", database.url, "--format", "json"]
    written = runner.invoke(main, [*args, "-o", str(out), "--from", "2025-03-01"])
    assert written.exit_code == 0, written.output
    assert len(json.loads(out.read_text())) == 1
    assert written.stderr.strip().endswith(f"-> {out}")
    assert not (Path.cwd() / "-").exists()
    empty = runner.invoke(main, [*args, "-o", str(out), "--to", "2025-01-01"])
    assert json.loads(out.read_text()) == []  # a valid empty document, and said so
    assert "no usage records of all tenants" in empty.stderr
    backwards = runner.invoke(main, [*args, "--from", "2025-03-02", "--to", "2025-03-01"])
    assert backwards.exit_code == 2
    assert "--to must be after --from" in backwards.output


def test_export_to_a_reader_that_stops_early_ends_quietly(database: Any) -> None:
    """``facegate usage export ... | head -3`` (the docs' example): the reader closes the
    pipe after a few lines; the export stops there, exit status 0, no traceback."""
    with session_scope(create_session_factory(database.engine)) as session:
        for _ in range(400):  # ~250 KB of NDJSON: more than a pipe holds
            record_job_usage(session, make_job("acme"), "succeeded", consumption(10), DAY1)
    command = [sys.executable, "-c", "from facegate.cli import main; main()", "usage", "export"]
    command += ["--database-url", database.url, "--format", "ndjson", "-o", "-"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()  # as head does after its lines
    errors = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=120) == 0, errors
    assert json.loads(first)["subject"] == "acme"
    assert "Traceback" not in errors
    assert "BrokenPipe" not in errors

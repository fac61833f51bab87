"""After real jobs of two tenants through HTTP: metric series and values, usage sums,
tenant-scoped usage and audit reads, and request logs carrying request id and tenant."""

from __future__ import annotations

import io
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families

from facegate.observability.logging import configure_logging, set_log_output
from facegate.worker.embedded import workers_service

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from jobhelpers import DEBUG_TENANT_POLICY, photo, submit, wait_terminal


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def log_stream() -> Any:
    stream = io.StringIO()
    configure_logging("info", stream=stream)
    yield stream
    set_log_output(None)
    structlog.reset_defaults()


async def test_two_tenants_metrics_usage_audit_and_logs(make_client: Any, log_stream: Any) -> None:
    # Unique tenant ids: the process-wide Prometheus registry outlives each test.
    alpha, beta = f"alpha-{uuid.uuid4().hex[:6]}", f"beta-{uuid.uuid4().hex[:6]}"
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant(alpha, **DEBUG_TENANT_POLICY)
        h.create_tenant(beta, **DEBUG_TENANT_POLICY)
        a_headers, b_headers = h.headers(alpha), h.headers(beta)
        admin = h.headers(f"ops-{uuid.uuid4().hex[:6]}", ["admin"])
        before = samples((await h.client.get("/metrics")).text)

        sizes = {alpha: [160, 200], beta: [120, 140]}
        jobs: dict[str, list[dict[str, Any]]] = {alpha: [], beta: []}
        for tenant, headers in ((alpha, a_headers), (beta, b_headers)):
            for width in sizes[tenant]:
                response = await submit(h.client, headers, target=photo(width=width))
                assert response.status_code == 202, response.text
                done = await wait_terminal(h.client, headers, response.json()["id"])
                assert done["status"] == "succeeded", done
                jobs[tenant].append(done)
        metrics_text = (await h.client.get("/metrics")).text
        after = samples(metrics_text)

        def delta(name: str, **labels: str) -> float:
            return value(after, name, **labels) - value(before, name, **labels)

        assert delta("facegate_jobs_submitted_total", tenant=alpha, kind="image") == 2
        assert delta("facegate_jobs_submitted_total", tenant=beta, kind="image") == 2
        assert (
            delta("facegate_jobs_finished_total", tenant=alpha, kind="image", status="succeeded")
            == 2
        )
        assert delta("facegate_job_queue_wait_seconds_count", tenant=alpha) == 2
        assert delta("facegate_compute_seconds_total", tenant=alpha, device="cpu") > 0
        assert (
            delta("facegate_http_requests_total", route="/v1/jobs", method="POST", status="202")
            == 4
        )
        # the route label is the template, never a raw path holding a job id
        assert (
            value(
                after,
                "facegate_http_requests_total",
                route="/v1/jobs/{job_id}",
                method="GET",
                status="200",
            )
            > 0
        )
        assert "/v1/jobs/" + jobs[alpha][0]["id"] not in metrics_text
        assert value(after, "facegate_jobs_queued", tenant=alpha) == 0
        assert ("facegate_running_job_heartbeat_age_seconds", ()) in after

        # usage: the sums equal what the jobs did
        usage_a = (await h.client.get("/v1/usage?group_by=total", headers=a_headers)).json()
        (total_a,) = usage_a["totals"]
        expected_pixels = sum(j["result"]["width"] * j["result"]["height"] for j in jobs[alpha])
        assert total_a["tenant_id"] == alpha
        assert total_a["jobs"] == 2
        assert total_a["frames"] == 2
        assert total_a["output_pixels"] == expected_pixels
        assert delta("facegate_output_pixels_total", tenant=alpha) == expected_pixels
        assert total_a["output_bytes"] == sum(j["result"]["bytes"] for j in jobs[alpha])
        # a tenant cannot read another's usage; an admin can (and that read is audited)
        other = await h.client.get(f"/v1/usage?tenant={beta}", headers=a_headers)
        assert other.status_code == 403
        by_day = (await h.client.get(f"/v1/usage?tenant={beta}", headers=admin)).json()
        assert sum(row["jobs"] for row in by_day["totals"]) == 2
        assert all("day" in row for row in by_day["totals"])
        export = await h.client.get("/v1/usage/export?format=ndjson", headers=b_headers)
        events = [json.loads(line) for line in export.text.splitlines()]
        assert {e["subject"] for e in events} == {beta}
        assert {e["type"] for e in events} == {"com.facegate.job.usage"}
        assert {e["id"] for e in events} == {j["id"] for j in jobs[beta]}

        # audit: the admin's read of beta's usage is an event beta sees, alpha does not
        a_auditor, b_auditor = h.headers(alpha, ["audit:read"]), h.headers(beta, ["audit:read"])
        beta_audit = (await h.client.get("/v1/audit", headers=b_auditor)).json()["events"]
        actions = {(e["action"], e["target"]) for e in beta_audit}
        assert ("admin.read", f"tenant:{beta}") in actions
        alpha_audit = (await h.client.get("/v1/audit", headers=a_auditor)).json()["events"]
        assert all(e["tenant_id"] == alpha for e in alpha_audit)

        # every log line of a request carries its request id and tenant
        probe = await h.client.get("/v1/jobs", headers={**a_headers, "X-Request-ID": "probe-12345"})
        assert probe.status_code == 200
    lines = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    probe_lines = [line for line in lines if line.get("request_id") == "probe-12345"]
    assert probe_lines, "the request logged nothing"
    assert all(line["tenant_id"] == alpha for line in probe_lines)
    assert any(
        line["event"] == "http.request" and line["route"] == "/v1/jobs" for line in probe_lines
    )
    job_lines = [line for line in lines if line.get("event") == "job.succeeded"]
    assert {line["tenant_id"] for line in job_lines} == {alpha, beta}
    assert all(line.get("job_id") and line.get("action") for line in job_lines)

"""The monitoring component (deploy/k8s/components/monitoring): the PrometheusRule's rules
pass ``promtool check rules`` and reference only our metrics; the Grafana dashboard has the
keys of its JSON model and every panel's PromQL names metrics that exist in our registry."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

import facegate.observability.metrics  # noqa: F401  (registers the metrics)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "components" / "monitoring"
DASHBOARD = DEPLOY / "grafana-dashboard.json"
RULE = DEPLOY / "prometheusrule.yaml"
# Computed at scrape time from the database (JobGaugeCollector, TakedownGaugeCollector),
# not in REGISTRY.
DB_GAUGES = {
    "facegate_jobs_queued",
    "facegate_jobs_running",
    "facegate_running_job_heartbeat_age_seconds",
    "facegate_takedown_open_cases",
    "facegate_takedown_oldest_open_case_age_seconds",
}
METRIC_NAME = re.compile(r"\bfacegate_[a-z0-9_]+")


def known_series() -> set[str]:
    names = set(DB_GAUGES)
    for family in REGISTRY.collect():
        names.update(sample.name for sample in family.samples)
        if family.type == "histogram":
            names.update(f"{family.name}_{s}" for s in ("bucket", "count", "sum"))
        if family.type == "counter":
            names.add(f"{family.name}_total")
        names.add(family.name)
    return names


def rule_groups() -> dict[str, Any]:
    """The PrometheusRule's spec: a Prometheus rules file."""
    document = yaml.safe_load(RULE.read_text())
    assert (document["apiVersion"], document["kind"]) == (
        "monitoring.coreos.com/v1",
        "PrometheusRule",
    )
    return {"groups": document["spec"]["groups"]}


def unknown_metrics(expr: str) -> set[str]:
    return set(METRIC_NAME.findall(expr)) - known_series()


def test_dashboard_json_model() -> None:
    model: dict[str, Any] = json.loads(DASHBOARD.read_text())
    for key in ("uid", "title", "panels", "schemaVersion", "templating", "time"):
        assert key in model, key
    ids = [panel["id"] for panel in model["panels"]]
    assert len(ids) == len(set(ids))
    titles = " ".join(panel["title"].lower() for panel in model["panels"])
    for topic in ("jobs", "queue wait", "compute seconds", "error", "rate-limited"):
        assert topic in titles, topic
    for panel in model["panels"]:
        for key in ("type", "title", "gridPos", "targets", "datasource"):
            assert key in panel, (panel.get("title"), key)
        assert set(panel["gridPos"]) >= {"h", "w", "x", "y"}
        for target in panel["targets"]:
            assert target["refId"]
            assert METRIC_NAME.search(target["expr"]), target["expr"]
            assert not unknown_metrics(target["expr"]), (panel["title"], target["expr"])


def test_alert_rules_reference_our_metrics() -> None:
    rules = [rule for group in rule_groups()["groups"] for rule in group["rules"]]
    names = {rule["alert"] for rule in rules}
    assert {
        "FacegateQueueWaitHigh",
        "FacegateJobFailureRatioHigh",
        "FacegateWorkerHeartbeatMissing",
    } <= names
    for rule in rules:
        assert not unknown_metrics(rule["expr"]), rule["alert"]


def test_the_check_catches_an_unknown_metric() -> None:
    assert unknown_metrics("rate(facegate_jobs_submited_total[5m])") == {
        "facegate_jobs_submited_total"
    }


def test_promtool_check_rules(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is missing in CI: scripts/system-packages installs it")
        pytest.skip(
            "promtool not installed (Debian package 'prometheus'; sudo scripts/system-packages)"
        )
    rules_file = tmp_path / "facegate-rules.yml"
    rules_file.write_text(yaml.safe_dump(rule_groups(), sort_keys=False))
    result = subprocess.run(
        [promtool, "check", "rules", str(rules_file)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout

"""Metrics (Prometheus), structured logs (structlog JSON) and the tamper-evident audit trail."""

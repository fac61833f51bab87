"""Webhooks: a tenant's endpoints are told when its jobs end (``job.succeeded``,
``job.failed``, ``job.cancelled``), signed as Standard Webhooks, retried with back-off from
an outbox table the worker side polls, and sent only to public addresses (SSRF-safe)."""

"""Usage records as CloudEvents (JSON / NDJSON) or CSV.

Each record becomes one CloudEvent: ``id`` = the job id (the idempotency key billing
systems deduplicate on), ``subject`` = the tenant (OpenMeter's subject, Lago's
``external_subscription_id``/customer), ``type`` = ``com.facegate.job.usage`` (the meter's
event type), ``time`` = when the job finished, ``data`` = the measured values. OpenMeter
ingests these documents as they are; for Lago each maps to one event with
``transaction_id`` = id, ``code`` = type and ``properties`` = data.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from facegate.usage.repository import SUMMED
from facegate.usage.tables import UsageRecord

EVENT_TYPE = "com.facegate.job.usage"
SPEC_VERSION = "1.0"
DEFAULT_SOURCE = "facegate"
ExportFormat = Literal["json", "ndjson", "csv"]

# The event's data: what was run, and every metered quantity (the repository's sums).
DATA_FIELDS = ("kind", "status", "device", *SUMMED, "processors", "model_variant")
CSV_FIELDS = ("id", "subject", "time", *DATA_FIELDS)


def to_cloudevent(record: UsageRecord, source: str = DEFAULT_SOURCE) -> dict[str, Any]:
    return {
        "specversion": SPEC_VERSION,
        "id": str(record.job_id),
        "source": source,
        "type": EVENT_TYPE,
        "subject": record.tenant_id,
        "time": record.finished_at.isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "data": {name: getattr(record, name) for name in DATA_FIELDS},
    }


def export_lines(
    records: Iterable[UsageRecord], fmt: ExportFormat, source: str = DEFAULT_SOURCE
) -> Iterator[str]:
    """The export as chunks of text (streamed: a month of records never sits in memory)."""
    events = (to_cloudevent(record, source) for record in records)
    if fmt == "ndjson":
        for event in events:
            yield json.dumps(event, separators=(",", ":")) + "\n"
    elif fmt == "json":
        yield "["
        for index, event in enumerate(events):
            yield ("," if index else "") + "\n" + json.dumps(event, separators=(",", ":"))
        yield "\n]\n"
    else:
        yield from _csv_lines(events)


def _csv_lines(events: Iterable[dict[str, Any]]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for event in events:
        row = {"id": event["id"], "subject": event["subject"], "time": event["time"]}
        data = event["data"]
        row.update({name: data[name] for name in DATA_FIELDS})
        row["processors"] = " ".join(data["processors"])
        writer.writerow(row)
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()


CONTENT_TYPES: dict[str, str] = {
    "json": "application/json",
    "ndjson": "application/x-ndjson",
    "csv": "text/csv; charset=utf-8",
}

"""Reports of suspected deepfakes (``POST /v1/reports``, public), recorded so that a flood
cannot fill a tenant's audit trail.

A report is traced like a verification, then becomes a **case**: one per reporter and
subject (the job it traces to, else the upload's SHA-256) per window
(``report_window_seconds``, fixed windows). Only opening a case writes an audit event; the
same report again in the window answers the same case and writes nothing. A reporter opens
at most ``reports_per_hour`` cases (then 429 ``rate-limited`` with ``Retry-After``), and a
subject takes at most ``reports_per_subject`` cases a window from distinct reporters; past
that, a report joins the subject's latest case (answered with its id, nothing written), so
even many addresses add at most that many events per job and window.

The reporter is a keyed pseudonym (HMAC under the installation's mark key) of who sent it:
a credential's tenant and actor, or the client address, an IPv6 one by its /64 (one host
holds a whole /64). The address itself is never stored. The ``report_id`` is random: it
says nothing of how many reports or events came before.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.orm import Session

from facegate.database import utcnow
from facegate.errors import RateLimited
from facegate.observability.audit import record_audit
from facegate.principal import Principal
from facegate.provenance.keys import InstallationKeys
from facegate.provenance.limits import InspectLimits
from facegate.provenance.repository import ReportRepository
from facegate.provenance.schemas import ReportIn, ReportOut
from facegate.provenance.tables import ProvenanceMark, ProvenanceReport
from facegate.provenance.verify import actor_of, trace_file

PROVENANCE_REPORT = "provenance.report"
#: Called with each case a report opens and the mark it traced to (the takedown queue).
CaseOpened = Callable[[ProvenanceReport, ProvenanceMark | None], None]
_HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class ReportLimits:
    """The report settings (``FACEGATE_REPORT_WINDOW_SECONDS``, ``FACEGATE_REPORTS_PER_HOUR``,
    ``FACEGATE_REPORTS_PER_SUBJECT``)."""

    window_seconds: int = 86400
    per_hour: int = 10
    per_subject: int = 20


def reporter_of(keys: InstallationKeys, principal: Principal | None, client: str) -> str:
    """The reporter's pseudonym: who sent the report, keyed so the address cannot be read
    back (an IPv4 address is one of 2^32: a plain hash would give it away). ``client`` is
    the gateway's client key (``ratelimit.clientip.client_key``: an IPv6 client by its
    ``FACEGATE_CLIENT_IPV6_PREFIX`` network), the one its limits and bans count by."""
    if principal is not None:
        who = f"principal:{principal.tenant_id}:{principal.actor}"
    else:
        who = f"client:{client}"
    return hmac.new(keys.mac_key("reporter"), who.encode(), hashlib.sha256).hexdigest()


def report_file(
    session: Session,
    keys: InstallationKeys,
    data: bytes,
    report: ReportIn,
    principal: Principal | None,
    client_ip: str,
    *,
    max_bytes: int,
    limits: ReportLimits,
    inspect: InspectLimits | None = None,
    on_case: CaseOpened | None = None,
) -> ReportOut:
    """A third party's report of a file: traced like a verification, then recorded on the
    audit trail under the owning tenant (its ``GET /v1/audit`` shows the report with the job,
    admins see every report), once per case. A file this installation did not make is
    recorded for the admins alone. The reporter learns only whether this installation made
    it, and the case's id."""
    found = trace_file(session, keys, data, max_bytes=max_bytes, limits=inspect)
    made_here = found.result.made_by_this_installation
    mark = found.mark
    subject = (
        f"job:{mark.job_id}" if mark is not None else f"sha256:{hashlib.sha256(data).hexdigest()}"
    )
    reporter = reporter_of(keys, principal, client_ip)
    now = utcnow()
    bucket = int(now.timestamp()) // limits.window_seconds
    cases = ReportRepository(session)

    def answer(case: ProvenanceReport) -> ReportOut:
        return ReportOut(report_id=case.id, made_by_this_installation=made_here)

    existing = cases.case(reporter, subject, bucket)
    if existing is not None:
        return answer(existing)  # the same report again: the case it opened
    opened = cases.opened_since(reporter, now - _HOUR)
    if len(opened) >= limits.per_hour:
        wait = opened[len(opened) - limits.per_hour] + _HOUR - now
        raise RateLimited(
            f"at most {limits.per_hour} reports an hour from one reporter",
            retry_after=max(1, math.ceil(wait.total_seconds())),
            limit="reports_per_hour",
        )
    count, latest = cases.latest_of_subject(subject, bucket)
    if latest is not None and count >= limits.per_subject:
        return answer(latest)  # the subject has its share of cases: this one joins the latest
    case = ProvenanceReport(
        id=secrets.token_hex(16),
        reporter=reporter,
        subject=subject,
        bucket=bucket,
        audit_seq=0,
        created_at=now,
    )
    if not cases.open(case):  # the same report, sent at the same moment, opened it first
        raced = cases.case(reporter, subject, bucket)
        assert raced is not None
        return answer(raced)
    event = record_audit(
        session,
        actor_of(principal),
        PROVENANCE_REPORT,
        f"job:{mark.job_id}" if mark is not None else "provenance:untraced",
        {
            "report_id": case.id,
            "reporter": reporter[:16],
            "message": report.message,
            "contact": report.contact,
            "traced_by": found.traced_by,
            "manifest": found.result.manifest.state,
            "watermark": found.result.watermark.found,
        },
        tenant_id=mark.tenant_id if mark is not None else None,
    )
    case.audit_seq = event.seq
    if on_case is not None:
        on_case(case, mark)
    return answer(case)

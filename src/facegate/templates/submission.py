"""What a job or a batch submits, resolved the same way for both: a template's options and
saved faces (or the request's own), the tenant's policy, the options checked against the
plan (403) before the installed models are looked up (409), and the saved faces named as
sources. Uploaded sources are read by the route, under the policy returned here."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from facegate.engine.modelstore.store import ModelStore
from facegate.jobs.policy import JobOptions, allowed_options
from facegate.jobs.service import MAX_SOURCES
from facegate.library.schemas import JobSources
from facegate.library.service import LibraryService
from facegate.models.installed import check_spec_installed
from facegate.principal import Principal
from facegate.storage.tenant import TenantStore
from facegate.templates.service import TemplateService, TemplateUse
from facegate.tenancy.service import TenancyService
from facegate.tenancy.tables import Policy


@dataclass(frozen=True)
class SubmissionInputs:
    """The checked options and the sources a submission names, and the policy they meet."""

    policy: Policy
    options: JobOptions  # parsed and allowed here, once
    face_ids: list[uuid.UUID]
    library: JobSources | None  # the saved faces as sources; None when they are uploaded
    template: TemplateUse | None


def resolve_inputs(
    session: Session,
    store: TenantStore,
    models: ModelStore,
    principal: Principal,
    *,
    options: str | None,
    template: str | None,
    face_ids: Sequence[uuid.UUID],
    uploaded: bool,
    policy: Policy | None = None,
) -> SubmissionInputs:
    """``template`` (id or name) brings the options and, when it names some, the faces;
    ``uploaded``: the request sends source images of its own; ``policy``: the tenant's,
    read by the caller (else read here)."""
    used = None
    if template is not None:
        used = TemplateService(session).for_submission(
            principal, template, options=options, sources_given=uploaded or bool(face_ids)
        )
        options, face_ids = used.options, used.face_ids or face_ids
    if policy is None:
        policy = TenancyService(session).get_policy(principal.tenant_id)
    checked = allowed_options(options, policy)
    check_spec_installed(checked.spec, principal.tenant_id, models)
    library = LibraryService(session, store).sources_for(
        principal, face_ids, uploaded=uploaded, max_faces=MAX_SOURCES
    )
    return SubmissionInputs(policy, checked, list(face_ids), library, used)

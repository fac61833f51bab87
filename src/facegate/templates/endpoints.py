"""HTTP routes of job templates: save and delete (``templates:write``: directors, editors),
list and read (``templates:read``: viewers too). Another tenant's template is a 404."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.orm import Session

from facegate.api.deps import SessionDep, get_state, run_in_session, scoped
from facegate.api.errors import PROBLEM_RESPONSES, problem_openapi
from facegate.models.installed import installation_model_store
from facegate.principal import TEMPLATES_READ, TEMPLATES_WRITE, Principal
from facegate.templates.repository import TemplateRepository
from facegate.templates.schemas import TemplateCreate, TemplateOut
from facegate.templates.service import TemplateService
from facegate.tenancy.service import TenancyService

router = APIRouter(prefix="/v1/templates", tags=["templates"], responses=PROBLEM_RESPONSES)

Reader = Annotated[Principal, scoped(TEMPLATES_READ)]
Writer = Annotated[Principal, scoped(TEMPLATES_WRITE)]


@router.post(
    "",
    status_code=201,
    responses={409: problem_openapi("The name is taken, or a processor or model is not installed")},
)
def create_template(
    body: TemplateCreate, request: Request, session: SessionDep, principal: Writer
) -> TemplateOut:
    """Save a pipeline, its options and its faces by name, validated as a job's options
    are (422 ``invalid-options`` / ``invalid-template``, 403 beyond the plan); audited."""
    policy = TenancyService(session).get_policy(principal.tenant_id)
    models = installation_model_store(get_state(request).settings)
    template = TemplateService(session).create(principal, body, policy, models)
    return TemplateOut.model_validate(template)


@router.get("")
async def list_templates(
    request: Request,
    principal: Reader,
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
) -> list[TemplateOut]:
    """The tenant's templates, newest first."""

    def read(session: Session) -> list[TemplateOut]:
        rows = TemplateRepository(session).list(principal.tenant_id, limit)
        return [TemplateOut.model_validate(row) for row in rows]

    return await run_in_session(request, read, read_only=True)


@router.get("/{template_id}")
def get_template(template_id: uuid.UUID, session: SessionDep, principal: Reader) -> TemplateOut:
    template = TemplateService(session).get(principal.tenant_id, template_id)
    return TemplateOut.model_validate(template)


@router.delete("/{template_id}", status_code=204, response_class=Response)
def delete_template(template_id: uuid.UUID, session: SessionDep, principal: Writer) -> Response:
    """Delete it (audited); jobs and batches that used it keep their own options."""
    TemplateService(session).delete(principal, template_id)
    return Response(status_code=204)

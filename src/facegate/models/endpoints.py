"""HTTP routes of tenant models: upload (when the policy allows it) and delete
(``models:write``), list (``jobs:read``). Every route is scoped to the caller's tenant;
another tenant's model answers 404.
``/v1/capabilities``: the processors and models the caller may use and are installed, and
its plan's limits."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Request, Response, UploadFile

from facegate.api.bodyguard import body_budget
from facegate.api.deps import SessionDep, get_state, scoped
from facegate.api.errors import PROBLEM_RESPONSES, problem_openapi
from facegate.engine.image import OUTPUT_FORMATS
from facegate.engine.modelstore.manifest import MODEL_KINDS
from facegate.engine.processors.registry import PROCESSORS, sensitive_processors
from facegate.jobs.runtime import tenant_store_for
from facegate.models.installed import (
    installation_model_store,
    installed_models,
    processor_installed,
)
from facegate.models.schemas import Capabilities, Limits, ModelList, ModelOut
from facegate.models.service import ModelService
from facegate.observability.audit import (
    MODEL_INSTALL,
    MODEL_REMOVE,
    model_installed_details,
    record_audit,
)
from facegate.principal import MODELS_WRITE, Principal
from facegate.tenancy.service import TenancyService

router = APIRouter(prefix="/v1", tags=["models"], responses=PROBLEM_RESPONSES)

ReadPrincipal = Annotated[Principal, scoped("jobs:read")]
# Installing or deleting a private model changes what every job of the tenant runs: the
# tenant admin's ``models:write``, not every job submitter's.
ManagePrincipal = Annotated[Principal, scoped(MODELS_WRITE)]


def _service(request: Request) -> ModelService:
    settings = get_state(request).settings
    return ModelService(installation_model_store(settings), settings.max_model_bytes)


@router.post(
    "/models",
    status_code=201,
    responses={
        403: problem_openapi("The tenant's policy does not allow custom models"),
        409: problem_openapi("This name and tag already exist"),
        422: problem_openapi("The file is not a valid model of the declared kind"),
    },
)
@body_budget("max_model_bytes")
def upload_model(
    request: Request,
    response: Response,
    session: SessionDep,
    principal: ManagePrincipal,
    file: Annotated[UploadFile, File(description="The ONNX model file")],
    name: Annotated[str, Form(max_length=100)],
    kind: Annotated[str, Form(description=f"One of: {', '.join(sorted(MODEL_KINDS))}")],
    tag: Annotated[str, Form(max_length=100)] = "v1",
    licence: Annotated[str, Form(max_length=200)] = "proprietary",
) -> ModelOut:
    """Install a private ONNX model for the calling tenant (checked before it is accepted)."""
    policy = TenancyService(session).get_policy(principal.tenant_id)
    version = _service(request).upload(
        principal.tenant_id, policy, file.file, name=name, tag=tag, kind=kind, licence=licence
    )
    record_audit(
        session,
        principal,
        MODEL_INSTALL,
        f"model:{version.name}:{version.tag}",
        model_installed_details(version),
    )
    response.headers["Location"] = f"/v1/models/{version.name}/{version.tag}"
    return ModelOut.of(version)


@router.get("/models")
def list_models(request: Request, principal: ReadPrincipal) -> ModelList:
    """Models the calling tenant's jobs can use: built-in, shared and its own."""
    return ModelList(items=[ModelOut.of(v) for v in _service(request).list(principal.tenant_id)])


@router.delete("/models/{name}/{tag}", status_code=204, response_class=Response)
def delete_model(
    name: str, tag: str, request: Request, session: SessionDep, principal: ManagePrincipal
) -> Response:
    """Remove one of the calling tenant's own model versions."""
    _service(request).delete(principal.tenant_id, name, tag)
    record_audit(session, principal, MODEL_REMOVE, f"model:{name}:{tag}")
    return Response(status_code=204)


@router.get("/capabilities")
def get_capabilities(
    request: Request, session: SessionDep, principal: ReadPrincipal
) -> Capabilities:
    """Processors and models the calling tenant may use and that are installed (built-in,
    shared, and its own private models), and its limits."""
    policy = TenancyService(session).get_policy(principal.tenant_id)
    settings = get_state(request).settings
    store = tenant_store_for(settings)
    models = installation_model_store(settings)
    tenant = principal.tenant_id
    processors = [
        p
        for p in sorted(PROCESSORS)
        if policy.allows_processor(p) and processor_installed(models, tenant, p)
    ]
    return Capabilities(
        processors=processors,
        sensitive_processors=sensitive_processors(processors),
        models=[m for m in installed_models(models, tenant) if policy.allows_model(m)],
        output_formats=list(OUTPUT_FORMATS),
        moderation=policy.moderation,
        require_consent=policy.require_consent,
        limits=Limits(
            max_input_bytes=policy.max_input_bytes,
            max_input_pixels=policy.max_input_pixels,
            max_video_seconds=policy.max_video_seconds,
            max_output_resolution=policy.max_output_resolution,
            max_concurrent_jobs=policy.max_concurrent_jobs,
            max_queued_jobs=policy.max_queued_jobs,
            storage_quota_bytes=policy.storage_quota_bytes,
            storage_used_bytes=store.usage_bytes(session, principal.tenant_id),
            retention_days=policy.retention_days,
            max_concurrent_streams=policy.max_concurrent_streams,
            max_stream_seconds=policy.max_stream_seconds,
        ),
    )

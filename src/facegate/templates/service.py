"""Template rules: a template is validated at save exactly as a job's options are (parsed,
the tenant's plan, the processors' own option checks, installed models), its saved faces
must each name one face of the library; a job or batch naming it gets its options and its
faces (resolved by name when used, so a face renamed in the library follows)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from facegate.engine.modelstore.store import ModelStore
from facegate.errors import Conflict, Forbidden, InvalidInput, NotFound
from facegate.jobs.options import parse_options, validate_processors
from facegate.jobs.policy import check_spec_allowed
from facegate.library.repository import LibraryRepository
from facegate.models.installed import check_spec_installed
from facegate.observability.audit import record_audit
from facegate.principal import FACES_READ, TEMPLATES_READ, Principal
from facegate.templates.repository import TemplateRepository
from facegate.templates.schemas import TemplateCreate
from facegate.templates.tables import JobTemplate
from facegate.tenancy.tables import Policy

TEMPLATE_CREATE: Final = "template.create"
TEMPLATE_DELETE: Final = "template.delete"
TEMPLATE_USE: Final = "template.use"


@dataclass(frozen=True)
class TemplateUse:
    """What a submission naming a template gets: the options text (as a job's ``options``
    field) and the saved faces, in source order."""

    template: JobTemplate
    options: str
    face_ids: list[uuid.UUID]


def _invalid(detail: str) -> InvalidInput:
    return InvalidInput(detail, code="invalid-template")


def template_options(body: TemplateCreate) -> dict[str, Any]:
    """The options object with the mapping by name turned into the selector's index pairs
    (source index = the face's place in ``faces``)."""
    data = dict(body.options)
    if len(set(body.faces)) != len(body.faces):
        raise _invalid("each saved face may appear once in faces")
    if body.mapping is None:
        return data
    unknown = sorted(set(body.mapping) - set(body.faces))
    if unknown:
        raise _invalid(f"mapping names faces not in faces: {', '.join(unknown)}")
    selector = data.get("selector")
    if "mapping" in data or (isinstance(selector, dict) and "mapping" in selector):
        raise _invalid("give the mapping once: by face name in mapping, not in options")
    data["mapping"] = [[body.faces.index(name), target] for name, target in body.mapping.items()]
    return data


class TemplateService:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.templates = TemplateRepository(session)

    def create(
        self, principal: Principal, body: TemplateCreate, policy: Policy, models: ModelStore
    ) -> JobTemplate:
        """Validate as a job would be validated, then save (audited); 409 on a name the
        tenant already uses."""
        text = json.dumps(template_options(body))
        spec = parse_options(text)
        check_spec_allowed(spec, policy)
        validate_processors(spec)
        check_spec_installed(spec, principal.tenant_id, models)
        if body.faces:
            if not principal.has(FACES_READ):
                raise Forbidden(
                    f"naming saved faces needs the {FACES_READ!r} scope", scope=FACES_READ
                )
            self.resolve_faces(principal.tenant_id, body.faces)
        if self.templates.get_by_name(principal.tenant_id, body.name) is not None:
            raise Conflict(f"this tenant has a template named {body.name!r} already")
        template = JobTemplate(
            id=uuid.uuid4(),
            tenant_id=principal.tenant_id,
            name=body.name,
            description=body.description,
            options=spec.model_dump(mode="json"),
            faces=list(body.faces),
            mapping=body.mapping,
            created_by=principal.actor[:200],
        )
        try:
            with self.session.begin_nested():
                self.templates.add(template)
        except IntegrityError:  # the same name saved at the same moment
            raise Conflict(f"this tenant has a template named {body.name!r} already") from None
        record_audit(
            self.session,
            principal,
            TEMPLATE_CREATE,
            f"template:{template.id}",
            {"name": template.name, "processors": spec.processors, "faces": template.faces},
        )
        return template

    def get(self, tenant_id: str, ref: uuid.UUID | str) -> JobTemplate:
        """By id, or by name (a string that is not a UUID); 404 for another tenant's."""
        template_id = ref if isinstance(ref, uuid.UUID) else _as_uuid(ref)
        template = (
            self.templates.get(tenant_id, template_id)
            if template_id is not None
            else self.templates.get_by_name(tenant_id, str(ref).strip())
        )
        if template is None:
            raise NotFound("no such template")
        return template

    def delete(self, principal: Principal, template_id: uuid.UUID) -> None:
        template = self.get(principal.tenant_id, template_id)
        self.templates.delete(template)
        record_audit(
            self.session,
            principal,
            TEMPLATE_DELETE,
            f"template:{template_id}",
            {"name": template.name},
        )

    def resolve_faces(self, tenant_id: str, names: Sequence[str]) -> list[uuid.UUID]:
        """The ids of the saved faces called ``names``, in order; 422 when a name matches
        no face or several."""
        found: dict[str, list[uuid.UUID]] = {}
        for face in LibraryRepository(self.session).named(tenant_id, names):
            found.setdefault(face.name, []).append(face.id)
        ids = []
        for name in names:
            matches = found.get(name, [])
            if not matches:
                raise _invalid(f"the face library has no face named {name!r}")
            if len(matches) > 1:
                raise _invalid(
                    f"the face library has {len(matches)} faces named {name!r}; "
                    "a template names faces that are unique"
                )
            ids.append(matches[0])
        return ids

    def for_submission(
        self, principal: Principal, ref: str, *, options: str | None, sources_given: bool
    ) -> TemplateUse:
        """The options and saved faces of template ``ref`` (id or name) for a job or batch
        naming it; it brings the options, so the submission may not send its own, and
        when it names faces, no sources either."""
        if not principal.has(TEMPLATES_READ):
            raise Forbidden(
                f"using a template needs the {TEMPLATES_READ!r} scope", scope=TEMPLATES_READ
            )
        if options is not None and options.strip():
            raise InvalidInput("send options or a template, not both", code="invalid-options")
        template = self.get(principal.tenant_id, ref)
        if template.faces and sources_given:
            raise InvalidInput(
                f"template {template.name!r} names its faces; send no source or source_face_id",
                code="invalid-options",
            )
        face_ids = self.resolve_faces(principal.tenant_id, template.faces)
        return TemplateUse(template, json.dumps(template.options, sort_keys=True), face_ids)

    def audit_use(self, principal: Principal, use: TemplateUse, target: str) -> None:
        record_audit(
            self.session,
            principal,
            TEMPLATE_USE,
            f"template:{use.template.id}",
            {"name": use.template.name, "for": target},
        )


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        return None

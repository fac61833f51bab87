"""A job's spec intersected with its tenant's policy: the checks made at the door (before
anything is stored) and again by the worker (the policy may have changed meanwhile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from facegate.engine.pipeline import PipelineSpec
from facegate.errors import Forbidden, InvalidInput
from facegate.jobs.options import parse_options
from facegate.tenancy.tables import Policy, fits_resolution


def requested_models(spec: PipelineSpec) -> list[tuple[str, str]]:
    """(processor, model) pairs the spec names explicitly."""
    pairs: list[tuple[str, str]] = []
    for processor in spec.processors:
        model = spec.processor_options.get(processor, {}).get("model")
        if isinstance(model, str):
            pairs.append((processor, model))
    return pairs


def check_spec_allowed(spec: PipelineSpec, policy: Policy) -> None:
    """Forbidden (403) naming the first processor or model the plan does not include."""
    for processor in spec.processors:
        if not policy.allows_processor(processor):
            raise Forbidden(
                f"processor {processor!r} is not allowed by this tenant's policy",
                limit="allowed_processors",
                processor=processor,
            )
    for processor, model in requested_models(spec):
        if not policy.allows_model(model):
            raise Forbidden(
                f"model {model!r} of processor {processor!r} is not allowed by this "
                "tenant's policy",
                limit="allowed_models",
                model=model,
            )


def output_size(spec: PipelineSpec, width: int, height: int) -> tuple[int, int]:
    """The size the result will have: the target's, times any upscaling processor's scale."""
    scale = 1
    for processor in spec.processors:
        value: Any = spec.processor_options.get(processor, {}).get("scale")
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            scale *= value
    return width * scale, height * scale


def check_output_resolution(spec: PipelineSpec, policy: Policy, width: int, height: int) -> None:
    """422 naming ``max_output_resolution`` when the result would be larger than the cap."""
    out_w, out_h = output_size(spec, width, height)
    if not fits_resolution(out_w, out_h, policy.max_output_resolution):
        raise InvalidInput(
            f"the output would be {out_w}x{out_h}, over this tenant's maximum output "
            f"resolution {policy.max_output_resolution}",
            code="output-resolution-exceeded",
            limit="max_output_resolution",
            limit_value=policy.max_output_resolution,
        )


@dataclass(frozen=True)
class JobOptions:
    """A job's options as sent (``text``: the Idempotency-Key fingerprint hashes it) and as
    parsed (``spec``), allowed by the tenant's plan. Made only by :func:`allowed_options`,
    at the door, so the services downstream neither parse nor check them again."""

    text: str | None
    spec: PipelineSpec


def allowed_options(text: str | None, policy: Policy) -> JobOptions:
    """Parse ``text`` (422 when malformed) and check it against ``policy`` (403)."""
    spec = parse_options(text)
    check_spec_allowed(spec, policy)
    return JobOptions(text, spec)

"""The ``options`` form field of a submission → an engine PipelineSpec.

Accepts the PipelineSpec shape itself (``processors``, ``processor_options``, ``selector``,
``output``) plus a few flat shortcuts for curl users: ``mapping`` (selector mapping),
``blend``/``mask``/``model`` (face_swapper options), ``format``/``quality`` (output).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from facegate.engine.pipeline import PipelineSpec
from facegate.engine.processors.registry import processor_class
from facegate.errors import InvalidInput

MAX_OPTIONS_CHARS = 16_384
SWAPPER_SHORTCUTS = ("blend", "mask", "model")
OUTPUT_SHORTCUTS = {"format": "format", "quality": "quality"}


def parse_options(raw: str | None) -> PipelineSpec:
    """422 (``invalid-options``) when the text is not a valid spec."""
    if raw is None or not raw.strip():
        return PipelineSpec()
    if len(raw) > MAX_OPTIONS_CHARS:
        raise _invalid(f"options are longer than {MAX_OPTIONS_CHARS} characters")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise _invalid(f"options are not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _invalid("options must be a JSON object")
    data = _expand_shortcuts(dict(data))
    try:
        return PipelineSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "options"
        raise _invalid(f"options.{where}: {first['msg']}") from None


def _expand_shortcuts(data: dict[str, Any]) -> dict[str, Any]:
    if "mapping" in data:
        selector = dict(data.get("selector") or {})
        selector.setdefault("mapping", data.pop("mapping"))
        selector.setdefault("mode", "many")
        data["selector"] = selector
    swapper = {key: data.pop(key) for key in SWAPPER_SHORTCUTS if key in data}
    if swapper:
        options = dict(data.get("processor_options") or {})
        options["face_swapper"] = {**swapper, **dict(options.get("face_swapper") or {})}
        data["processor_options"] = options
        data.setdefault("processors", ["face_swapper"])
    output = {target: data.pop(key) for key, target in OUTPUT_SHORTCUTS.items() if key in data}
    if output:
        data["output"] = {**output, **dict(data.get("output") or {})}
    return data


def validate_processors(spec: PipelineSpec) -> None:
    """Each processor exists and accepts its options (InvalidOptions); the checks
    ``Pipeline(spec)`` makes, on the processors' classes: nothing is loaded (whether their
    models are installed is ``models.installed.check_spec_installed``'s question)."""
    stray = set(spec.processor_options) - set(spec.processors)
    if stray:
        raise _invalid(f"options given for processors not in the pipeline: {sorted(stray)}")
    for name in spec.processors:
        try:
            processor = processor_class(name)
        except ImportError:
            raise _invalid(f"processor {name!r} is not installed") from None
        processor.validate_options(spec.processor_options.get(name))


def _invalid(detail: str) -> InvalidInput:
    return InvalidInput(detail, code="invalid-options")

"""Which source face goes onto which target face.

Modes (FaceFusion's, plus explicit mapping, which FaceFusion lacks):

- ``one``: the first target face after ordering gets source 0.
- ``many``: every target face gets source 0 — or, with several source faces that are
  *different* people (``average_sources`` false) and no mapping, source i goes onto target i
  (targets beyond the last source are left alone).
- ``reference``: the target faces whose descriptor distance to the reference face (face
  ``reference_face_index`` of the reference frame, after ordering) is under
  ``reference_distance`` get source 0. The descriptor is the recogniser's
  (``engine.identity``, dlib's ResNet) where the pipeline attached it to both faces
  (it does in reference mode when the recogniser is installed, as it is in the lock and the
  image), else the geometric one (``engine.descriptor``). Left unset, ``reference_distance``
  is the threshold of the descriptor in use: 0.6 for the recogniser, 0.018 geometric.
- ``mapping`` (with ``one`` or ``many``): explicit [source_index, target_index] pairs; target
  indices count the target faces after filtering and ordering.

Source identity averaging (``average_sources``): the source images show one person. Every
selected pair then uses source 0, and :func:`prepare_sources` gives source 0 the mean of all
source descriptors (``Face.extra["averaged_from"]`` = how many). A geometric swapper keeps
texturing from source 0 (the first source photo's pixels and mesh); an embedding-driven
swapper (inswapper, simswap) should read source 0's ``embedding``, which is the average.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from facegate.engine.descriptor import average_embedding, face_distance
from facegate.engine.errors import InvalidOptions
from facegate.engine.faces import FaceOrder, filter_faces, sort_faces
from facegate.engine.identity import SAME_PERSON_DISTANCE, comparable
from facegate.engine.types import Face

#: Geometric descriptor distance under which two faces count as the same person. Calibrated
#: on shared/data/faces (see descriptor.py's docstring for the measured distances).
DEFAULT_REFERENCE_DISTANCE = 0.018


class SelectorSpec(BaseModel):
    """Face selection options of a job (plain data; validated, immutable)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["one", "many", "reference"] = "one"
    order: FaceOrder = "large-small"
    min_size: float = Field(default=0.0, ge=0.0, description="px, the box's shorter side")
    min_score: float = Field(default=0.0, ge=0.0, le=1.0)
    reference_face_index: int = Field(default=0, ge=0)
    # None: the threshold of the descriptor in use (see the module docstring).
    reference_distance: float | None = Field(default=None, gt=0.0)
    mapping: list[tuple[int, int]] | None = None
    average_sources: bool = False

    @model_validator(mode="after")
    def _check_mapping(self) -> SelectorSpec:
        if self.mapping is None:
            return self
        if self.mode == "reference":
            raise ValueError("mapping cannot be combined with mode 'reference'")
        if not self.mapping:
            raise ValueError("mapping must hold at least one [source_index, target_index] pair")
        for source, target in self.mapping:
            if source < 0 or target < 0:
                raise ValueError(f"mapping indices must be >= 0, got [{source}, {target}]")
        targets = [target for _, target in self.mapping]
        if len(set(targets)) != len(targets):
            raise ValueError("mapping gives one target face two sources")
        return self


def order_targets(target_faces: Sequence[Face], spec: SelectorSpec) -> list[Face]:
    """Target faces filtered by the spec's minimums and in its order."""
    kept = filter_faces(target_faces, spec.min_size, spec.min_score)
    return sort_faces(kept, spec.order)


def select_faces(
    source_faces: Sequence[Face],
    target_faces: Sequence[Face],
    spec: SelectorSpec,
    reference_faces: Sequence[Face] = (),
) -> list[tuple[int, Face]]:
    """(source face index, target face) pairs to process, in target order."""
    targets = order_targets(target_faces, spec)
    if spec.mapping is not None:
        return _mapped(source_faces, targets, spec.mapping)
    if not targets:
        return []
    if spec.mode == "one":
        return [(0, targets[0])]
    if spec.mode == "many":
        if len(source_faces) > 1 and not spec.average_sources:
            return [(index, target) for index, target in enumerate(targets[: len(source_faces)])]
        return [(0, target) for target in targets]
    return [(0, target) for target in _matching(targets, spec, reference_faces)]


def _mapped(
    source_faces: Sequence[Face], targets: list[Face], mapping: list[tuple[int, int]]
) -> list[tuple[int, Face]]:
    for source, target in mapping:
        if source >= len(source_faces):
            raise InvalidOptions(
                f"mapping source index {source} is out of range: "
                f"{len(source_faces)} source face(s) found"
            )
        if target >= len(targets):
            raise InvalidOptions(
                f"mapping target index {target} is out of range: "
                f"{len(targets)} target face(s) found"
            )
    return [(source, targets[target]) for source, target in sorted(mapping, key=lambda p: p[1])]


def _matching(
    targets: list[Face], spec: SelectorSpec, reference_faces: Sequence[Face]
) -> list[Face]:
    references = sort_faces(reference_faces, spec.order)
    if not references:
        raise InvalidOptions("selector mode 'reference' needs a reference image with a face")
    if spec.reference_face_index >= len(references):
        raise InvalidOptions(
            f"reference_face_index {spec.reference_face_index} is out of range: "
            f"{len(references)} face(s) in the reference image"
        )
    reference = references[spec.reference_face_index]
    return [target for target in targets if same_person(reference, target, spec)]


def same_person(reference: Face, target: Face, spec: SelectorSpec) -> bool:
    """``target`` is within ``spec.reference_distance`` of ``reference``, by the recogniser's
    descriptor where both faces carry it, else by the geometric one."""
    a, b, learned = comparable(reference, target)
    if a is None or b is None:
        return False
    limit = spec.reference_distance
    if limit is None:
        limit = SAME_PERSON_DISTANCE if learned else DEFAULT_REFERENCE_DISTANCE
    return face_distance(a, b) < limit


def prepare_sources(source_faces: Sequence[Face], spec: SelectorSpec) -> list[Face]:
    """Source faces as the swapper should see them: with ``average_sources``, source 0 carries
    the averaged descriptor of all of them (a copy; the inputs are not changed)."""
    faces = list(source_faces)
    if not spec.average_sources or len(faces) < 2:
        return faces
    averaged = dataclasses.replace(
        faces[0],
        embedding=average_embedding(faces),
        extra={**faces[0].extra, "averaged_from": len(faces)},
    )
    return [averaged, *faces[1:]]

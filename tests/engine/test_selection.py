"""Face ordering, filters and selection on synthetic faces (no model involved)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from facegate.engine.errors import InvalidOptions
from facegate.engine.faces import average_embedding, filter_faces, sort_faces
from facegate.engine.identity import GEOMETRIC, KIND, LEARNED
from facegate.engine.selection import SelectorSpec, prepare_sources, select_faces
from facegate.engine.types import Face


def create_face(
    x: float, y: float, size: float, score: float = 0.9, embedding: list[float] | None = None
) -> Face:
    vector = np.array(embedding or [1.0, 0.0, 0.0], dtype=np.float32)
    return Face(
        box=np.array([x, y, x + size, y + size], dtype=np.float32),
        score=score,
        keypoints5=np.zeros((5, 2), dtype=np.float32),
        landmarks=np.zeros((478, 3), dtype=np.float32),
        embedding=vector / np.linalg.norm(vector),
    )


def create_group() -> list[Face]:
    # small/left/top, large/right/bottom, medium/middle, low score
    return [
        create_face(10, 10, 20, score=0.8),
        create_face(300, 200, 90, score=0.95),
        create_face(150, 100, 50, score=0.6),
    ]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("large-small", [1, 2, 0]),
        ("small-large", [0, 2, 1]),
        ("left-right", [0, 2, 1]),
        ("right-left", [1, 2, 0]),
        ("top-bottom", [0, 2, 1]),
        ("bottom-top", [1, 2, 0]),
        ("best-worst", [1, 0, 2]),
        ("worst-best", [2, 0, 1]),
    ],
)
def test_sort_faces(order: str, expected: list[int]) -> None:
    group = create_group()
    assert [group.index(f) for f in sort_faces(group, order)] == expected


def test_sort_faces_rejects_an_unknown_order() -> None:
    with pytest.raises(InvalidOptions, match="sideways"):
        sort_faces(create_group(), "sideways")


def test_filter_faces_by_size_and_score() -> None:
    group = create_group()
    assert filter_faces(group, min_size=40) == [group[1], group[2]]
    assert filter_faces(group, min_score=0.7) == [group[0], group[1]]
    assert filter_faces(group, min_size=40, min_score=0.7) == [group[1]]


def test_one_takes_the_first_target_after_ordering() -> None:
    group = create_group()
    spec = SelectorSpec(mode="one", order="left-right")
    assert select_faces([create_face(0, 0, 10)], group, spec) == [(0, group[0])]
    assert select_faces([create_face(0, 0, 10)], [], spec) == []


def test_one_honours_the_filters() -> None:
    group = create_group()
    spec = SelectorSpec(mode="one", order="small-large", min_size=40)
    assert select_faces([create_face(0, 0, 10)], group, spec) == [(0, group[2])]


def test_many_with_one_source_takes_every_target() -> None:
    group = create_group()
    selected = select_faces([create_face(0, 0, 10)], group, SelectorSpec(mode="many"))
    assert selected == [(0, group[1]), (0, group[2]), (0, group[0])]


def test_many_with_different_sources_pairs_them_in_order() -> None:
    group = create_group()
    sources = [create_face(0, 0, 10), create_face(0, 0, 12)]
    spec = SelectorSpec(mode="many", order="left-right")
    assert select_faces(sources, group, spec) == [(0, group[0]), (1, group[2])]


def test_many_with_averaged_sources_uses_source_zero_everywhere() -> None:
    group = create_group()
    sources = [create_face(0, 0, 10), create_face(0, 0, 12)]
    spec = SelectorSpec(mode="many", average_sources=True)
    assert [s for s, _ in select_faces(sources, group, spec)] == [0, 0, 0]


def test_mapping_pairs_explicit_indices() -> None:
    group = create_group()
    sources = [create_face(0, 0, 10), create_face(0, 0, 12)]
    spec = SelectorSpec.model_validate(
        {"mode": "many", "order": "left-right", "mapping": [[0, 1], [1, 0]]}
    )
    assert select_faces(sources, group, spec) == [(1, group[0]), (0, group[2])]


@pytest.mark.parametrize(
    ("mapping", "message"),
    [([[2, 0]], "source index 2"), ([[0, 3]], "target index 3")],
)
def test_mapping_out_of_range_names_the_index(mapping: list[list[int]], message: str) -> None:
    sources = [create_face(0, 0, 10), create_face(0, 0, 12)]
    spec = SelectorSpec.model_validate({"mode": "many", "mapping": mapping})
    with pytest.raises(InvalidOptions, match=message):
        select_faces(sources, create_group(), spec)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mode": "all"}, "mode"),
        ({"order": "up-down"}, "order"),
        ({"mapping": [[0, 1], [1, 1]]}, "two sources"),
        ({"mapping": [[-1, 0]]}, ">= 0"),
        ({"mapping": []}, "at least one"),
        ({"mode": "reference", "mapping": [[0, 0]]}, "reference"),
        ({"mapping": [[0, 1, 2]]}, "mapping"),
        ({"min_score": 2}, "min_score"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_invalid_specs_are_refused_clearly(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SelectorSpec.model_validate(data)


def test_spec_is_frozen() -> None:
    spec = SelectorSpec()
    with pytest.raises(ValidationError):
        spec.mode = "many"  # type: ignore[misc]


def test_reference_picks_faces_close_to_the_reference() -> None:
    alike = create_face(10, 10, 40, embedding=[1.0, 0.005, 0.0])
    other = create_face(200, 10, 60, embedding=[0.9, 0.3, 0.1])
    reference = create_face(0, 0, 50, embedding=[1.0, 0.0, 0.0])
    spec = SelectorSpec(mode="reference")
    assert select_faces([reference], [other, alike], spec, [reference]) == [(0, alike)]
    loose = SelectorSpec(mode="reference", reference_distance=2.0)
    assert len(select_faces([reference], [other, alike], loose, [reference])) == 2


def learned(face: Face, descriptor: list[float]) -> Face:
    """``face`` as the pipeline leaves it once the recogniser's descriptor is attached."""
    face.extra[GEOMETRIC] = face.embedding
    face.extra[KIND] = LEARNED
    face.embedding = np.array(descriptor, np.float32)
    return face


def test_reference_uses_the_recogniser_where_both_faces_have_it() -> None:
    # Geometrically alike but 0.7 apart for the recogniser: a stranger of similar shape.
    reference = learned(create_face(0, 0, 50, embedding=[1.0, 0.0, 0.0]), [0.0, 0.0])
    stranger = learned(create_face(10, 10, 40, embedding=[1.0, 0.005, 0.0]), [0.7, 0.0])
    same = learned(create_face(200, 10, 40, embedding=[0.9, 0.3, 0.1]), [0.3, 0.3])
    spec = SelectorSpec(mode="reference")
    assert select_faces([reference], [stranger, same], spec, [reference]) == [(0, same)]
    # A face without the learned descriptor is compared by the geometric one, both sides.
    plain = create_face(10, 10, 40, embedding=[1.0, 0.005, 0.0])
    assert select_faces([reference], [plain], spec, [reference]) == [(0, plain)]
    # An explicit threshold is in the units of the descriptor in use.
    strict = SelectorSpec(mode="reference", reference_distance=0.2)
    assert select_faces([reference], [stranger, same], strict, [reference]) == []


def test_reference_face_index_chooses_the_reference_face() -> None:
    first = create_face(0, 0, 80, embedding=[1.0, 0.0, 0.0])
    second = create_face(100, 0, 40, embedding=[0.0, 1.0, 0.0])
    target = create_face(10, 10, 40, embedding=[0.0, 1.0, 0.0])
    spec = SelectorSpec(mode="reference", reference_face_index=1)
    assert select_faces([first], [target], spec, [second, first]) == [(0, target)]
    too_far = SelectorSpec(mode="reference", reference_face_index=2)
    with pytest.raises(InvalidOptions, match="reference_face_index 2"):
        select_faces([first], [target], too_far, [first, second])


def test_reference_without_reference_faces_is_an_error() -> None:
    with pytest.raises(InvalidOptions, match="reference"):
        select_faces([create_face(0, 0, 9)], create_group(), SelectorSpec(mode="reference"))


def test_prepare_sources_averages_only_when_asked() -> None:
    sources = [
        create_face(0, 0, 10, embedding=[1.0, 0.0, 0.0]),
        create_face(0, 0, 10, embedding=[0.0, 1.0, 0.0]),
    ]
    assert prepare_sources(sources, SelectorSpec()) == sources
    averaged = prepare_sources(sources, SelectorSpec(average_sources=True))
    assert averaged[0] is not sources[0]
    assert averaged[0].extra["averaged_from"] == 2
    assert averaged[0].embedding is not None
    np.testing.assert_allclose(averaged[0].embedding, [0.70710677, 0.70710677, 0.0], rtol=1e-6)
    np.testing.assert_allclose(averaged[0].embedding, average_embedding(sources))
    assert sources[0].embedding is not None
    np.testing.assert_allclose(sources[0].embedding, [1.0, 0.0, 0.0])  # input untouched

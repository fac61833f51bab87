"""A tenant-private ONNX swapper through the real Pipeline: usable by its tenant's job,
refused for another tenant; pins and the A/B variant land in ``models_used``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from facegate.engine.errors import ModelUnavailable
from facegate.engine.faces import FaceAnalyser
from facegate.engine.identity import IdentityDescriber
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.modelstore.tags import ModelRequest, TagPolicy, choose_variant
from facegate.engine.networks.face_helper import WARP_TEMPLATES
from facegate.engine.pipeline import Pipeline, PipelineSpec
from facegate.engine.processors.registry import ProcessorRegistry
from facegate.engine.types import Face, Frame
from onnx_graphs import arcface_graph, swapper_graph

ARC_W = np.random.default_rng(5).normal(size=(3, 512)).astype(np.float32)


class FixedAnalyser(FaceAnalyser):
    """Finds the same one face in every frame (the model path is under test, not detection)."""

    def __init__(self, face: Face) -> None:
        super().__init__()
        self.face = face

    def analyse(self, frame: Frame, timings: dict[str, float] | None = None) -> list[Face]:
        return [self.face]


def create_face(size: int = 128, offset: tuple[int, int] = (60, 50)) -> Face:
    keypoints = (WARP_TEMPLATES["arcface_128"] * size + np.array(offset)).astype(np.float32)
    box = np.array([*offset, offset[0] + size, offset[1] + size], np.float32)
    return Face(box=box, score=1.0, keypoints5=keypoints, landmarks=np.zeros((478, 3), np.float32))


@pytest.fixture
def hub(tmp_path: Path) -> ModelHub:
    """A hub over a temp store (only this test's files) with a shared recognizer."""
    created = ModelHub(ModelStore(tmp_path / "models", include_builtins=False))
    arc = arcface_graph(tmp_path / "arc.onnx", ARC_W)
    created.store.add(
        "arcface_w600k_r50", "v1", {"model": arc}, kind="face_recognizer", licence="t"
    )
    return created


def add_private_swapper(hub: ModelHub, tmp: Path, tenant: str, tag: str, gain: tuple) -> None:
    graph = swapper_graph(tmp / f"inswapper_128-{tag}.onnx", 128, gain)
    hub.store.add(
        "inswapper_128", tag, {"model": graph}, kind="face_swapper", licence="t", tenant=tenant
    )


def create_pipeline(hub: ModelHub) -> Pipeline:
    spec = PipelineSpec.model_validate(
        {
            "processors": ["face_swapper"],
            "processor_options": {"face_swapper": {"model": "inswapper_128", "mask_blur": 0.0}},
        }
    )
    return Pipeline(
        spec,
        analyser=FixedAnalyser(create_face()),
        registry=ProcessorRegistry(hub),
        identity=IdentityDescriber(),
    )


def create_frame() -> Frame:
    return np.random.default_rng(2).integers(0, 256, size=(240, 260, 3), dtype=np.uint8)


def test_private_swapper_is_used_by_its_tenant(hub: ModelHub, tmp_path: Path) -> None:
    add_private_swapper(hub, tmp_path, "acme", "v1", (1.0, 0.0, 0.0))  # keeps red only
    frame = create_frame()
    used: dict[str, str] = {}
    out = create_pipeline(hub).run_image(
        [frame], frame, model_request=ModelRequest(tenant="acme", job_id="j1"), models_used=used
    )
    inner = (slice(55, 175), slice(65, 185))
    assert out[inner][:, :, :2].max() == 0  # blue and green gone: the private model ran
    assert np.abs(out[inner][:, :, 2].astype(int) - frame[inner][:, :, 2]).max() <= 1
    assert used == {"inswapper_128": "v1", "arcface_w600k_r50": "v1"}


def test_private_swapper_is_refused_for_another_tenant(hub: ModelHub, tmp_path: Path) -> None:
    add_private_swapper(hub, tmp_path, "acme", "v1", (1.0, 0.0, 0.0))
    frame = create_frame()
    with pytest.raises(ModelUnavailable, match="inswapper_128"):
        create_pipeline(hub).run_image(
            [frame], frame, model_request=ModelRequest(tenant="globex", job_id="j2")
        )
    with pytest.raises(ModelUnavailable, match="inswapper_128"):
        create_pipeline(hub).run_image([frame], frame)  # nor for the shared installation


def test_ab_split_variant_is_recorded(hub: ModelHub, tmp_path: Path) -> None:
    add_private_swapper(hub, tmp_path, "acme", "v1", (1.0, 0.0, 0.0))
    add_private_swapper(hub, tmp_path, "acme", "v2", (0.0, 0.0, 1.0))  # keeps blue only
    policy = TagPolicy(splits={"inswapper_128": {"v1": 1.0, "v2": 1.0}})
    frame = create_frame()
    seen = set()
    for job_id in ("a", "b", "c", "d", "e", "f"):
        used: dict[str, str] = {}
        request = ModelRequest(tenant="acme", policy=policy, job_id=job_id)
        out = create_pipeline(hub).run_image(
            [frame], frame, model_request=request, models_used=used
        )
        variant = choose_variant("inswapper_128", job_id, {"v1": 1.0, "v2": 1.0})
        assert used["inswapper_128"] == variant
        kept = 2 if variant == "v1" else 0  # BGR index of the channel the variant keeps
        assert out[100, 120, kept] != 0 or frame[100, 120, kept] == 0
        assert out[100, 120, 1] == 0
        seen.add(variant)
    assert seen == {"v1", "v2"}

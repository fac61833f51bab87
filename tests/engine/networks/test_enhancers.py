from __future__ import annotations

import itertools
from pathlib import Path

import cv2
import numpy as np
import pytest

from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.inference import InferencePool
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.networks.face_helper import WARP_TEMPLATES
from facegate.engine.networks.frame_enhance import (
    forward_real_esrgan,
    normalize_tile_frame,
    prepare_tile_frame,
)
from facegate.engine.networks.tiling import enhance_fitted, enhance_tiled, fitted_spans
from facegate.engine.processors.base import JobContext
from facegate.engine.processors.face_enhancer import FaceEnhancer
from facegate.engine.processors.frame_enhancer import FrameEnhancer
from facegate.engine.types import Face
from onnx_graphs import codeformer_graph, upscale_graph


def create_frame(height: int, width: int, seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def create_hub(tmp_path: Path, builtins: bool = False) -> ModelHub:
    store = ModelStore(tmp_path / "models", include_builtins=builtins)
    store.add(
        "real_esrgan_x2",
        "v1",
        {"model": upscale_graph(tmp_path / "x2.onnx", 2, 0.5, 0.25)},
        kind="frame_enhancer",
        licence="t",
    )
    store.add(
        "codeformer",
        "v1",
        {"model": codeformer_graph(tmp_path / "cf.onnx")},
        kind="face_enhancer",
        licence="t",
    )
    return ModelHub(store, InferencePool())


def create_context(processor: FaceEnhancer | FrameEnhancer, raw: dict[str, object]) -> JobContext:
    ctx = JobContext(options={processor.name: processor.validate_options(raw)})
    processor.prepare(ctx)
    return ctx


def create_face(template: str, size: int, offset: tuple[int, int]) -> Face:
    points = (WARP_TEMPLATES[template] * size + np.array(offset)).astype(np.float32)
    box = np.array([*offset, offset[0] + size, offset[1] + size], np.float32)
    return Face(box=box, score=1.0, keypoints5=points, landmarks=np.zeros((478, 3), np.float32))


@pytest.mark.parametrize(("height", "width"), [(300, 410), (37, 23), (240, 240)])
def test_tiled_equals_untiled_for_a_pointwise_model(
    tmp_path: Path, height: int, width: int
) -> None:
    model = create_hub(tmp_path).onnx("real_esrgan_x2")
    frame = create_frame(height, width)

    def run(tile: np.ndarray) -> np.ndarray:
        return normalize_tile_frame(forward_real_esrgan(model, prepare_tile_frame(tile)))

    tiled = enhance_tiled(frame, (256, 16, 8), 2, run)
    assert tiled.shape == (height * 2, width * 2, 3)
    np.testing.assert_array_equal(tiled, run(frame))
    small_tiles = enhance_tiled(frame, (24, 4, 6), 2, run, mode="reflect")
    np.testing.assert_array_equal(small_tiles, run(frame))


def test_frame_enhancer_scales_and_blends(tmp_path: Path) -> None:
    processor = FrameEnhancer(create_hub(tmp_path))
    frame = create_frame(50, 70)
    ctx = create_context(processor, {"model": "real_esrgan_x2", "blend": 80})
    assert ctx.models_used == {"real_esrgan_x2": "v1"}
    out = processor.process_frame(frame, ctx)
    enhanced = ((np.repeat(np.repeat(frame, 2, 0), 2, 1) / 255 * 0.5 + 0.25) * 255).astype(np.uint8)
    resized = cv2.resize(frame, (140, 100), interpolation=cv2.INTER_CUBIC)
    expected = resized * 0.2 + enhanced * 0.8
    assert out.shape == (100, 140, 3)
    assert np.abs(out - expected).max() <= 1


def test_codeformer_weight_normalisation_and_paste(tmp_path: Path) -> None:
    processor = FaceEnhancer(create_hub(tmp_path))
    frame = create_frame(640, 640)
    face = create_face("ffhq_512", 512, (60, 70))
    ctx = create_context(
        processor, {"model": "codeformer", "blend": 100, "weight": 0.5, "mask_blur": 0.0}
    )
    ctx.target_faces = [face]
    out = processor.process_frame(frame, ctx)
    # output = input * 0.5 in [-1, 1] space: x -> round(x/2 + 63.75)
    expected = np.round(frame.astype(np.float64) / 2 + 63.75)
    inner = (slice(70 + 2, 70 + 510), slice(60 + 2, 60 + 510))  # where the box mask is 1
    assert np.abs(out[inner] - expected[inner]).max() <= 1
    np.testing.assert_array_equal(out[:70], frame[:70])  # above the crop: untouched


def test_builtin_ncnn_enhancers_run_offline(tmp_path: Path) -> None:
    hub = create_hub(tmp_path, builtins=True)
    frames = FrameEnhancer(hub)
    frames.check_models()
    frame = cv2.resize(create_frame(8, 8), (32, 32), interpolation=cv2.INTER_CUBIC)
    ctx = create_context(frames, {"model": "realesr_animevideov3_x2", "blend": 100})
    out = frames.process_frame(frame, ctx)
    assert out.shape == (64, 64, 3)
    reference = cv2.resize(frame, (64, 64), interpolation=cv2.INTER_CUBIC)
    assert np.abs(out.astype(int) - reference).mean() < 25  # an upscale of the same picture
    faces = FaceEnhancer(hub)
    ctx = create_context(faces, {"model": "realesr_animevideov3_x4", "blend": 100})
    assert ctx.models_used == {"realesr_animevideov3_x4": "builtin"}
    big = cv2.resize(frame, (300, 300), interpolation=cv2.INTER_CUBIC)
    ctx.target_faces = [create_face("ffhq_512", 200, (50, 40))]
    restored = faces.process_frame(big, ctx)
    assert restored.shape == big.shape
    assert not np.array_equal(restored[100:200, 100:200], big[100:200, 100:200])
    np.testing.assert_array_equal(restored[:38], big[:38])


@pytest.mark.parametrize(("length", "tile", "overlap"), [(128, 192, 8), (500, 96, 8), (1, 96, 8)])
def test_fitted_spans_cover_the_length_with_tiles_that_fit(
    length: int, tile: int, overlap: int
) -> None:
    spans = fitted_spans(length, tile, overlap)
    assert spans[0][0] == 0
    assert spans[-1][1] == length
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    assert all(end - start + 2 * overlap <= tile for start, end in spans)
    assert len(spans) == -(-length // (tile - 2 * overlap))  # no more tiles than needed


@pytest.mark.parametrize(("height", "width"), [(300, 410), (37, 23), (1, 1), (128, 128)])
def test_fitted_tiles_have_no_seams_for_a_local_model(height: int, width: int) -> None:
    """A 3x3 blur then 2x upscale sees one pixel around each output: with an overlap of 4 the
    tiled result equals the model run once on the whole (reflect-padded) frame."""
    frame = create_frame(height, width)
    calls: list[tuple[int, ...]] = []

    def run(tile: np.ndarray) -> np.ndarray:
        calls.append(tile.shape)
        blurred = cv2.blur(tile, (3, 3), borderType=cv2.BORDER_REFLECT_101)
        return np.repeat(np.repeat(blurred, 2, 0), 2, 1)

    padded = np.pad(frame, ((4, 4), (4, 4), (0, 0)), mode="reflect")
    expected = run(padded)[8:-8, 8:-8]
    calls.clear()
    tiled = enhance_fitted(frame, 40, 4, 2, run)
    assert tiled.shape == (height * 2, width * 2, 3)
    np.testing.assert_array_equal(tiled, expected)
    assert all(shape[0] <= 40 and shape[1] <= 40 for shape in calls)
    # Pixels run: the frame plus the overlaps, not whole fixed tiles.
    assert sum(h * w for h, w, _ in calls) == (height + 8 * len(fitted_spans(height, 40, 4))) * (
        width + 8 * len(fitted_spans(width, 40, 4))
    )

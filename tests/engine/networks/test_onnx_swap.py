from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from facegate.engine.networks.face_helper import (
    explode_pixel_boost,
    implode_pixel_boost,
)
from facegate.engine.networks.onnx_swap import OnnxSource, OnnxSwapBackend
from facegate.engine.networks.recognizer import l2_normalise, prepare_arcface_crop
from facegate.engine.networks.swap_models import (
    SWAPPERS,
    balance_source_embedding,
    normalize_crop_frame,
    prepare_crop_frame,
    read_emap,
)
from facegate.engine.swap.options import FaceSwapperOptions
from onnx_graphs import ARC_W, create_face, create_frame, create_hub


def test_arcface_crop_is_the_aligned_window_normalised() -> None:
    frame = create_frame()
    face = create_face("arcface_112_v2", 112, (50, 60))
    crop = prepare_arcface_crop(frame, face.keypoints5)
    window = frame[60:172, 50:162].astype(np.float64)
    expected = (window / 127.5 - 1)[:, :, ::-1].transpose(2, 0, 1)[None]
    np.testing.assert_allclose(crop, expected, atol=1e-6)


def test_inswapper_source_uses_last_initializer_as_emap(tmp_path: Path) -> None:
    hub = create_hub(tmp_path, "inswapper_128", (1, 1, 1))
    backend = OnnxSwapBackend("inswapper_128", hub)
    frame = create_frame()
    face = create_face("arcface_112_v2", 112, (50, 60))
    state = backend.prepare_source([face], [frame], FaceSwapperOptions())
    assert isinstance(state, OnnxSource)
    crop = prepare_arcface_crop(frame, face.keypoints5)
    raw = crop.mean(axis=(2, 3)) @ ARC_W
    np.testing.assert_allclose(state.embedding, raw.ravel(), rtol=1e-4, atol=1e-6)
    emap = read_emap(str(tmp_path / "models" / "inswapper_128" / "v1" / "inswapper_128.onnx"))
    assert emap.shape == (512, 512)
    assert not np.allclose(emap, 0)
    fed = backend.source_input(state, frame, face, FaceSwapperOptions())
    np.testing.assert_allclose(fed, raw @ emap / np.linalg.norm(raw), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("model", "scale", "normalised"), [("simswap_256", 2.0, True), ("ghost_1_256", 3.0, False)]
)
def test_converter_sources(tmp_path: Path, model: str, scale: float, normalised: bool) -> None:
    hub = create_hub(tmp_path, model, (1, 1, 1))
    backend = OnnxSwapBackend(model, hub)
    frame = create_frame()
    face = create_face("arcface_112_v2", 112, (50, 60))
    state = backend.prepare_source([face], [frame], FaceSwapperOptions())
    assert isinstance(state, OnnxSource)
    fed = backend.source_input(state, frame, face, FaceSwapperOptions())
    converted = state.embedding * scale
    expected = l2_normalise(converted) if normalised else converted
    np.testing.assert_allclose(fed.ravel(), expected, rtol=1e-5)


def test_weight_mixes_with_normalised_target_embedding() -> None:
    source = np.ones(512, np.float32)
    target = np.full(512, 4.0, np.float32)
    spec = SWAPPERS["inswapper_128"]
    np.testing.assert_allclose(balance_source_embedding(source, target, 0.5, spec), source[None])
    mixed = balance_source_embedding(source, target, 0.0, spec)  # w' = 0.35
    np.testing.assert_allclose(mixed, (source * 0.65 + l2_normalise(target) * 0.35)[None])


@pytest.mark.parametrize("model", ["inswapper_128", "hyperswap_1a_256", "simswap_256"])
def test_crop_normalisation_round_trip(model: str) -> None:
    spec = SWAPPERS[model]
    crop = create_frame(spec.size, spec.size)
    prepared = prepare_crop_frame(crop, spec)
    rgb = crop[:, :, ::-1] / 255.0
    np.testing.assert_allclose(
        prepared[0].transpose(1, 2, 0), (rgb - spec.mean) / spec.std, rtol=1e-5, atol=1e-6
    )
    back = normalize_crop_frame(prepared[0], spec)
    if spec.denormalises or spec.mean == (0, 0, 0):
        np.testing.assert_allclose(back, crop, atol=1e-3)
    else:  # simswap: the raw output is clipped to 0..1, no denormalisation
        expected = prepared[0].transpose(1, 2, 0).clip(0, 1)[:, :, ::-1] * 255
        np.testing.assert_allclose(back, expected, atol=1e-3)


def test_pixel_boost_split_is_space_to_depth() -> None:
    crop = create_frame(256, 256)
    tiles = implode_pixel_boost(crop, 2, 128)
    assert tiles.shape == (4, 128, 128, 3)
    np.testing.assert_array_equal(tiles[1], crop[0::2, 1::2])  # (row 0, column 1)
    np.testing.assert_array_equal(tiles[2], crop[1::2, 0::2])
    np.testing.assert_array_equal(explode_pixel_boost(tiles, 2, 128), crop)


@pytest.mark.parametrize("boost", [None, 256])
def test_swap_aligns_runs_and_pastes_back(tmp_path: Path, boost: int | None) -> None:
    # The stand-in model keeps only the red channel: in the pasted face blue and green
    # become 0 and red is kept, which checks alignment, RGB order, normalisation and paste.
    hub = create_hub(tmp_path, "inswapper_128", (1.0, 0.0, 0.0))
    backend = OnnxSwapBackend("inswapper_128", hub)
    frame = create_frame(400, 400)
    size = boost or 128
    face = create_face("arcface_128", size, (100, 90))
    options = FaceSwapperOptions(model="inswapper_128", mask_blur=0.0)
    object.__setattr__(options, "pixel_boost_size", boost)  # until the options carry it
    state = backend.prepare_source([face], [frame], options)
    out = backend.swap_face(frame, state, face, options)
    inner = (slice(92, 90 + size - 2), slice(102, 100 + size - 2))  # inside the 1 px border
    assert out[inner][:, :, :2].max() == 0
    assert np.abs(out[inner][:, :, 2].astype(int) - frame[inner][:, :, 2]).max() <= 1
    outside = np.ones(frame.shape[:2], bool)
    outside[90 : 90 + size, 100 : 100 + size] = False
    np.testing.assert_array_equal(out[outside], frame[outside])

"""A stand-in for open_nsfw in tests: a tiny ONNX classifier with the real model's input
and output (``input:0`` N×224×224×3 BGR minus the mean (104, 117, 123) -> ``outputs`` N×2
(sfw, nsfw)) that scores one marker colour high, installed through the model store like any
operator model, so the service's wiring is tested without explicit material.

The marker is the magenta of ``face_debugger``'s mask tint (BGR 255, 0, 200): a patch of it
in an upload gets that upload refused, and a ``face_debugger`` job with ``mask_opacity`` 1
*produces* it, which is how a clean upload gets a flagged output. Natural photos score ~0:
the score rises only where, over an 8×8 block of the 224² input, blue and red both exceed
green by 150 levels or more.
"""

from __future__ import annotations

import json
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper

from facegate.engine.modelstore.store import ModelStore

MARKER_BGR = (255, 0, 200)
STANDIN_TAG = "standin"
#: A job whose output carries the marker (face_debugger's mask, fully opaque).
FLAG_OUTPUT: dict[str, Any] = {
    "processors": ["face_debugger"],
    "processor_options": {"face_debugger": {"items": ["mask"], "mask_opacity": 1.0}},
}
SWAP: dict[str, Any] = {"processors": ["face_swapper"]}
POLICY: dict[str, Any] = {
    "allowed_processors": ["face_swapper", "face_debugger"],
    "requests_per_minute": 1_000_000,
}
_MEAN_BGR = (104.0, 117.0, 123.0)


def standin_classifier(margin: float = 150.0) -> bytes:
    """The stand-in's ONNX bytes (opset 17); a huge ``margin`` makes one that flags nothing."""
    f32 = TensorProto.FLOAT
    inits = [
        helper.make_tensor("mean", f32, [3], list(_MEAN_BGR)),
        helper.make_tensor("margin", f32, [], [margin]),
        helper.make_tensor("gain", f32, [], [0.1]),
        helper.make_tensor("one", f32, [], [1.0]),
        helper.make_tensor("split", TensorProto.INT64, [3], [1, 1, 1]),
        helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
    ]
    nodes = [
        helper.make_node("Add", ["input:0", "mean"], ["raw"]),  # back to 0..255 BGR
        helper.make_node("Split", ["raw", "split"], ["b", "g", "r"], axis=3),
        helper.make_node("Min", ["b", "r"], ["br"]),
        helper.make_node("Sub", ["br", "g"], ["magenta"]),  # N×224×224×1
        helper.make_node("Transpose", ["magenta"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("AveragePool", ["nchw"], ["blocks"], kernel_shape=[8, 8], strides=[8, 8]),
        helper.make_node("ReduceMax", ["blocks"], ["peak"], axes=[1, 2, 3], keepdims=0),
        helper.make_node("Sub", ["peak", "margin"], ["over"]),
        helper.make_node("Mul", ["over", "gain"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["nsfw_flat"]),
        helper.make_node("Unsqueeze", ["nsfw_flat", "axis1"], ["nsfw"]),
        helper.make_node("Sub", ["one", "nsfw"], ["sfw"]),
        helper.make_node("Concat", ["sfw", "nsfw"], ["outputs"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "open_nsfw_standin",
        [helper.make_tensor_value_info("input:0", f32, ["N", 224, 224, 3])],
        [helper.make_tensor_value_info("outputs", f32, ["N", 2])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def write_standin(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "open-nsfw-standin.onnx"
    path.write_bytes(standin_classifier())
    return path


def install_standin(models_dir: Path) -> None:
    """Install the stand-in as ``open_nsfw:standin`` in the shared store (the newest tag, so
    moderation uses it instead of the built-in)."""
    path = write_standin(models_dir.parent / "standin-src")
    ModelStore(models_dir).add(
        "open_nsfw",
        STANDIN_TAG,
        {"model": path},
        kind="nsfw_classifier",
        licence="test-only",
        input_spec={"size": 224, "layout": "NHWC"},
    )


def install_standin_with_cli(facegate: str, models_dir: Path, env: dict[str, str]) -> None:
    """The same through ``facegate models add`` (the operator's way; the cluster tests)."""
    path = write_standin(models_dir.parent / "standin-src")
    subprocess.run(
        [
            facegate,
            "models",
            "add",
            "open_nsfw",
            str(path),
            "--models-dir",
            str(models_dir),
            "--tag",
            STANDIN_TAG,
            "--kind",
            "nsfw_classifier",
            "--licence",
            "test-only",
            "--input",
            json.dumps({"size": 224, "layout": "NHWC"}),
        ],
        env=env,
        check=True,
        capture_output=True,
    )


def with_marker(frame: np.ndarray, share: float = 0.4) -> np.ndarray:
    """A copy of ``frame`` with a centred marker square ``share`` of its short side wide."""
    out = frame.copy()
    h, w = out.shape[:2]
    side = max(16, round(min(h, w) * share))
    y0, x0 = (h - side) // 2, (w - side) // 2
    out[y0 : y0 + side, x0 : x0 + side] = MARKER_BGR
    return out


def marked(jpeg: bytes) -> bytes:
    """A JPEG upload with the marker drawn on it."""
    frame = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    ok, encoded = cv2.imencode(".jpg", with_marker(frame), [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return bytes(encoded.tobytes())


def options(value: dict[str, Any]) -> dict[str, str]:
    return {"options": json.dumps(value)}


def decisions(metrics_text: str, tenant: str) -> dict[str, float]:
    """decision -> value of facegate_moderation_decisions_total for ``tenant``."""
    found: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if line.startswith("facegate_moderation_decisions_total{") and f'tenant="{tenant}"' in line:
            decision = line.split('decision="')[1].split('"')[0]
            found[decision] = float(line.rsplit(" ", 1)[1])
    return found


def write_marker_clip(
    path: Path,
    times: list[Fraction],
    flagged: set[int],
    size: tuple[int, int] = (64, 48),
) -> None:
    """An H.264 clip of plain grey frames shown at ``times`` (seconds, increasing: a
    variable frame rate when they are uneven), the frames in ``flagged`` all marker."""
    width, height = size
    grey = np.full((height, width, 3), 128, np.uint8)
    marker = np.full((height, width, 3), MARKER_BGR, np.uint8)
    write_clip(path, [marker if i in flagged else grey for i in range(len(times))], times)


def write_clip(
    path: Path,
    frames: list[np.ndarray],
    times: list[Fraction],
    time_base: Fraction = Fraction(1, 12000),
) -> None:
    """An H.264 clip of BGR ``frames`` (one size) shown at ``times`` (seconds)."""
    height, width = frames[0].shape[:2]
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=30)
        assert isinstance(video, av.VideoStream)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.codec_context.time_base = time_base
        video.time_base = time_base
        video.options = {"preset": "ultrafast"}
        for frame, time in zip(frames, times, strict=True):
            picture = av.VideoFrame.from_ndarray(frame, format="bgr24")
            picture.pts, picture.time_base = round(time / time_base), time_base
            out.mux(video.encode(picture))
        out.mux(video.encode())


def steady_times(frames: int, fps: int = 30) -> list[Fraction]:
    return [Fraction(index, fps) for index in range(frames)]

"""Plain factories for the model tests: tiny ONNX graphs with FaceFusion's input/output names
and shapes whose outputs are known functions of their inputs, installed in a temp store; and
the frames and faces to feed them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.inference import InferencePool
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.networks.face_helper import WARP_TEMPLATES
from facegate.engine.networks.swap_models import SWAPPERS
from facegate.engine.types import Face

OPSET = [helper.make_opsetid("", 17)]


def save_graph(
    path: Path,
    nodes: list[onnx.NodeProto],
    inputs: list[tuple[str, list[object]]],
    outputs: list[tuple[str, list[object]]],
    initializers: list[np.ndarray] | None = None,
    names: list[str] | None = None,
    dtype: int = TensorProto.FLOAT,
) -> Path:
    graph = helper.make_graph(
        nodes,
        path.stem,
        [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, dtype, s) for n, s in outputs],
        initializer=[
            numpy_helper.from_array(a, name=nm)
            for a, nm in zip(initializers or [], names or [], strict=True)
        ],
    )
    model = helper.make_model(graph, opset_imports=OPSET)
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, np.float32))
    )


def install(
    store: ModelStore,
    tmp: Path,
    name: str,
    kind: str,
    graph_path: Path,
    tag: str = "v1",
    tenant: str | None = None,
) -> None:
    store.add(name, tag, {"model": graph_path}, kind=kind, licence="test", tenant=tenant)


def create_frame(height: int = 240, width: int = 320) -> np.ndarray:
    rng = np.random.default_rng(11)
    return rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)


def create_face(template: str, size: int, offset: tuple[int, int]) -> Face:
    """A face whose key points sit exactly on ``template`` scaled to ``size`` and shifted by
    an integer offset: the aligned crop is then a plain copy of the frame window."""
    keypoints = (WARP_TEMPLATES[template] * size + np.array(offset)).astype(np.float32)
    box = np.array([offset[0], offset[1], offset[0] + size, offset[1] + size], np.float32)
    return Face(box=box, score=1.0, keypoints5=keypoints, landmarks=np.zeros((478, 3), np.float32))


def identity_graph(path: Path, in_name: str, out_name: str, shape: list[object]) -> Path:
    return save_graph(
        path,
        [helper.make_node("Identity", [in_name], [out_name])],
        [(in_name, shape)],
        [(out_name, shape)],
    )


def affine_graph(
    path: Path, in_name: str, out_name: str, shape: list[object], scale: float, offset: float
) -> Path:
    """out = in * scale + offset (pointwise)."""
    nodes = [
        const("s", np.array(scale)),
        const("o", np.array(offset)),
        helper.make_node("Mul", [in_name, "s"], ["m"]),
        helper.make_node("Add", ["m", "o"], [out_name]),
    ]
    return save_graph(path, nodes, [(in_name, shape)], [(out_name, shape)])


def swapper_graph(path: Path, size: int, channel_gain: tuple[float, float, float]) -> Path:
    """output = target * gain per RGB channel; ``source`` is accepted (1×512) but unused, and
    a 512×512 EMAP initializer is the graph's last one, as in inswapper_128."""
    rng = np.random.default_rng(7)
    emap = rng.normal(size=(512, 512)).astype(np.float32)
    nodes = [
        const("gain", np.array(channel_gain, np.float32).reshape(1, 3, 1, 1)),
        helper.make_node("Mul", ["target", "gain"], ["output"]),
    ]
    return save_graph(
        path,
        nodes,
        [("target", [1, 3, size, size]), ("source", [1, 512])],
        [("output", [1, 3, size, size])],
        initializers=[np.zeros(4, np.float32), emap],
        names=["unused_first", "emap"],
    )


def arcface_graph(path: Path, weights: np.ndarray) -> Path:
    """output = mean over H, W of each channel, times ``weights`` (3×512)."""
    nodes = [
        helper.make_node("ReduceMean", ["input"], ["m"], axes=[2, 3], keepdims=0),
        const("w", weights),
        helper.make_node("MatMul", ["m", "w"], ["output"]),
    ]
    return save_graph(path, nodes, [("input", [1, 3, 112, 112])], [("output", [1, 512])])


def upscale_graph(path: Path, scale: int, gain: float, offset: float) -> Path:
    """Nearest-neighbour ×scale, then ``x*gain + offset``: pointwise, so tiling must not show."""
    nodes = [
        const("scales", np.array([1, 1, scale, scale], np.float32)),
        helper.make_node("Resize", ["input", "", "scales"], ["up"], mode="nearest"),
        const("g", np.array(gain)),
        const("o", np.array(offset)),
        helper.make_node("Mul", ["up", "g"], ["m"]),
        helper.make_node("Add", ["m", "o"], ["output"]),
    ]
    return save_graph(path, nodes, [("input", [1, 3, "h", "w"])], [("output", [1, 3, "H", "W"])])


def codeformer_graph(path: Path, size: int = 512) -> Path:
    """output = input * weight (the float64 ``weight`` input cast to float)."""
    weight = helper.make_tensor_value_info("weight", TensorProto.DOUBLE, [1])
    nodes = [
        helper.make_node("Cast", ["weight"], ["wf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["input", "wf"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "codeformer",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size]), weight],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])],
    )
    model = helper.make_model(graph, opset_imports=OPSET)
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


ARC_W = np.random.default_rng(3).normal(size=(3, 512)).astype(np.float32)


def create_hub(
    tmp_path: Path,
    swapper: str,
    gain: tuple[float, float, float],
    pool: InferencePool | None = None,
) -> ModelHub:
    """A store with ``swapper`` (a stand-in that multiplies each RGB channel by ``gain``),
    the ArcFace stand-in and the embedding converters, served by ``pool``."""
    store = ModelStore(tmp_path / "models", include_builtins=False)
    spec = SWAPPERS[swapper]
    graph = swapper_graph(tmp_path / f"{swapper}.onnx", spec.size, gain)
    store.add(swapper, "v1", {"model": graph}, kind="face_swapper", licence="test")
    arc = arcface_graph(tmp_path / "arc.onnx", ARC_W)
    store.add("arcface_w600k_r50", "v1", {"model": arc}, kind="face_recognizer", licence="t")
    for name, scale in (("crossface_simswap", 2.0), ("crossface_ghost", 3.0)):
        conv = affine_graph(tmp_path / f"{name}.onnx", "input", "output", [1, 512], scale, 0.0)
        store.add(name, "v1", {"model": conv}, kind="embedding_converter", licence="t")
    return ModelHub(store, pool or InferencePool())

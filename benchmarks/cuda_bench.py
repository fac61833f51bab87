"""The CUDA execution path's speed, against the CPU in the same run. Prints numbers; asserts
nothing.

No FaceFusion model ships with facegate (an operator puts them in the model store), so this
builds a stand-in with inswapper_128's inputs and output (``target`` 1x3x128x128, ``source``
1x512 -> ``output`` 1x3x128x128) and a swapper-like body with random weights: a strided conv
encoder to 32x32, residual blocks modulated by the source embedding, an upsampling decoder.
Its size in GFLOP per call is printed; real models differ, so read the figures as what the
execution path costs (load, per-call latency, the CUDA/CPU ratio), not as a model's speed.

The model is loaded through facegate's ``InferencePool`` with ``device="cpu"`` and, where
onnxruntime has the CUDA provider (onnxruntime-gpu and an NVIDIA GPU), ``device="cuda"``;
each is timed call by call (the swap calls its model once per face, batch 1).

On CUDA the model is timed again loaded as the start-up warm-up list loads it
(``InferencePool.warm_up``: one run on zeros), whose first call is then a steady one.

    python benchmarks/cuda_bench.py [--runs 30] [--channels 256] [--blocks 6]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from facegate.engine.modelstore.inference import Device, InferencePool, PoolSettings

SIZE = 128


class GraphBuilder:
    """Nodes and random initializers of a conv net, with its multiply-adds counted."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []
        self.flops = 0
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def constant(self, array: npt.NDArray[np.number[Any]], dtype: type = np.float32) -> str:
        name = self.name("w")
        self.weights.append(numpy_helper.from_array(array.astype(dtype), name=name))
        return name

    def node(self, op: str, inputs: list[str], **attributes: Any) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attributes))
        return out

    def conv(self, x: str, cin: int, cout: int, side_out: int, stride: int = 1) -> str:
        scale = np.sqrt(2.0 / (9 * cin))
        weight = self.constant(self.rng.normal(0, scale, (cout, cin, 3, 3)))
        bias = self.constant(np.zeros(cout))
        self.flops += 2 * 9 * cin * cout * side_out * side_out
        return self.node("Conv", [x, weight, bias], pads=[1, 1, 1, 1], strides=[stride, stride])

    def relu(self, x: str) -> str:
        return self.node("Relu", [x])

    def upsample(self, x: str) -> str:
        scales = self.constant(np.array([1, 1, 2, 2]))
        return self.node("Resize", [x, "", scales], mode="nearest")


def swapper_stand_in(path: Path, channels: int, blocks: int) -> float:
    """Write the stand-in model to ``path``; its GFLOP per call."""
    g = GraphBuilder()
    x = g.relu(g.conv("target", 3, channels // 4, SIZE // 2, stride=2))
    x = g.relu(g.conv(x, channels // 4, channels // 2, SIZE // 4, stride=2))
    x = g.relu(g.conv(x, channels // 2, channels, SIZE // 4))
    side = SIZE // 4
    for _ in range(blocks):
        projection = g.constant(g.rng.normal(0, 0.05, (512, channels)))
        style = g.node("MatMul", ["source", projection])
        style = g.node("Reshape", [style, g.constant(np.array([1, channels, 1, 1]), np.int64)])
        g.flops += 2 * 512 * channels
        y = g.relu(g.node("Add", [g.conv(x, channels, channels, side), style]))
        x = g.node("Add", [x, g.conv(y, channels, channels, side)])
    x = g.relu(g.conv(g.upsample(x), channels, channels // 2, SIZE // 2))
    x = g.conv(g.upsample(x), channels // 2, 3, SIZE)
    g.nodes.append(helper.make_node("Sigmoid", [x], ["output"]))
    graph = helper.make_graph(
        g.nodes,
        "inswapper_stand_in",
        [
            helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, SIZE, SIZE]),
            helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        initializer=g.weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return g.flops / 1e9


def time_device(
    path: Path, device: Device, runs: int, warm_up: bool = False
) -> dict[str, float | str]:
    """Load (``warm_up``: as the start-up warm-up list does, which on CUDA also runs the
    model once on zeros), then the first call and the steady calls."""
    pool = InferencePool(PoolSettings(device=device))
    started = time.perf_counter()
    if warm_up:
        pool.warm_up([path])
    session = pool.session(path)
    load = time.perf_counter() - started
    rng = np.random.default_rng(1)
    feed = {
        "target": rng.random((1, 3, SIZE, SIZE), dtype=np.float32),
        "source": rng.normal(size=(1, 512)).astype(np.float32),
    }
    first = time.perf_counter()
    session.run(None, feed)
    first_call = time.perf_counter() - first
    for _ in range(3):
        session.run(None, feed)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - started)
    return {
        "provider": session.get_providers()[0],
        "load_s": load,
        "first_call_ms": first_call * 1000,
        "p50_ms": statistics.median(times) * 1000,
        "min_ms": min(times) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--channels", type=int, default=256)
    parser.add_argument("--blocks", type=int, default=6)
    args = parser.parse_args()
    installed = ort.get_available_providers()
    print(f"onnxruntime {ort.__version__}: {', '.join(installed)}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "inswapper_stand_in.onnx"
        gflop = swapper_stand_in(path, args.channels, args.blocks)
        print(
            f"stand-in: {args.channels} channels, {args.blocks} blocks, {gflop:.1f} GFLOP/call, "
            f"{path.stat().st_size / 2**20:.0f} MiB"
        )
        devices: list[Device] = ["cpu"]
        if "CUDAExecutionProvider" in installed:
            devices.append("cuda")
        else:
            print("no CUDAExecutionProvider: CPU only (install onnxruntime-gpu on an NVIDIA host)")
        results = {device: time_device(path, device, args.runs) for device in devices}
        if "cuda" in results:
            warmed = time_device(path, "cuda", args.runs, warm_up=True)
    for device, r in [
        *results.items(),
        *([("cuda, warmed up", warmed)] if "cuda" in results else []),
    ]:
        print(
            f"  {device:4} ({r['provider']}): load {r['load_s']:.2f} s, first call "
            f"{r['first_call_ms']:.1f} ms, p50 {r['p50_ms']:.2f} ms, min {r['min_ms']:.2f} ms, "
            f"{gflop / (float(r['p50_ms']) / 1000):.0f} GFLOP/s"
        )
    if "cuda" in results:
        ratio = float(results["cpu"]["p50_ms"]) / float(results["cuda"]["p50_ms"])
        print(f"  CUDA is {ratio:.1f}x the CPU's speed per call (p50)")


if __name__ == "__main__":
    main()

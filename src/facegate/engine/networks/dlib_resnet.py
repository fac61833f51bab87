"""dlib's face recognition ResNet read from its own ``.dat`` file and run by onnxruntime.

dlib-bin, as the package registry ships it, is built without a BLAS: one descriptor takes
~120-180 ms of a CPU core there. The same network run by onnxruntime takes a few
milliseconds, and the weights are the very ones dlib loads: this module reads dlib's
serialisation of ``anet_type`` (``tools/python/src/face_recognition.cpp`` in dlib's sources:
a ResNet of 29 convolutions on a 150 px RGB chip, a 128-d ``fc_no_bias`` at the end) and
builds the same computation as an ONNX graph, in memory, at load. Nothing is downloaded and
no file is written.

The layers, as dlib computes them (``dlib/dnn/layers.h``, ``cpu_dlib.cpp``):

- the input: ``(pixel - avg) / 256`` per channel, R, G, B (the averages are in the file);
- ``con``: cross-correlation with bias, its own stride and padding (0 where the stride is 2);
- ``affine``: per-channel ``x * gamma + beta`` (batch norm folded at training's end);
- ``max_pool`` 3x3/2 and ``avg_pool`` 2x2/2 without padding; ``avg_pool_everything``: the
  mean over the whole map;
- ``add_prev``: the sum of two tensors of different shapes is taken over the larger shape,
  the smaller zero-padded at its end (a residual block's shortcut has fewer channels, and at
  8 -> 4 px the pooled shortcut is one pixel larger than the strided convolution's output);
- ``fc_no_bias``: ``x @ W`` with ``W`` of (inputs, outputs).

``tests/engine/test_identity_onnx.py`` checks the descriptors against dlib's own on the test
photos (equal to ~1e-5) — the recogniser stays the same judge, only faster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from facegate.engine.types import FloatArray

CHIP_SIZE = 150


class FormatError(ValueError):
    """The file is not the dlib network this module knows."""


class _Reader:
    """dlib's serialisation primitives (``dlib/serialize.h``)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise FormatError(f"the file ends inside a value at byte {self.pos}")
        value = self.data[self.pos : self.pos + size]
        self.pos += size
        return value

    def byte(self) -> int:
        return self.take(1)[0]

    def integer(self) -> int:
        """An integer: a control byte (bit 7 the sign, low 4 bits the length), then the
        magnitude's bytes, little-endian."""
        control = self.byte()
        size = control & 0x0F
        if size == 0 or size > 8:
            raise FormatError(f"bad integer at byte {self.pos - 1}")
        value = int.from_bytes(self.take(size), "little")
        return -value if control & 0x80 else value

    def real(self) -> float:
        """A float: its mantissa and exponent as two integers (``float_details``)."""
        if self.data[self.pos : self.pos + 1] and self.data[self.pos] & 0x70:
            raise FormatError("the old ASCII float format is not supported")
        mantissa, exponent = self.integer(), self.integer()
        if exponent >= 0x7FFF - 2:  # dlib's inf / -inf / nan markers
            raise FormatError("a non-finite float in the network")
        return float(mantissa) * 2.0**exponent

    def boolean(self) -> bool:
        value = self.byte()
        if value not in (ord("0"), ord("1")):
            raise FormatError(f"bad bool at byte {self.pos - 1}")
        return value == ord("1")

    def text(self) -> str:
        size = self.integer()
        try:
            return self.take(size).decode("ascii")
        except UnicodeDecodeError as error:
            raise FormatError("a layer's name is not ASCII") from error

    def tensor(self) -> FloatArray:
        """A ``resizable_tensor``: version 2, (n, k, nr, nc), then raw float32s."""
        if self.integer() != 2:
            raise FormatError("unknown tensor version")
        shape = tuple(self.integer() for _ in range(4))
        if any(n < 0 for n in shape):
            raise FormatError("a tensor of negative size")
        values = np.frombuffer(self.take(4 * int(np.prod(shape))), dtype="<f4")
        return values.reshape(shape).astype(np.float32)

    def alias(self) -> tuple[int, ...]:
        """An ``alias_tensor``: version 1 and its shape (its values live in ``params``)."""
        if self.integer() != 1:
            raise FormatError("unknown alias_tensor version")
        return tuple(self.integer() for _ in range(4))


@dataclass
class Layer:
    """One layer of the network, input side first after ``read``."""

    kind: str  # con, affine, relu, max_pool, avg_pool, add_prev, fc, tag, skip
    tag: int = 0  # tag/skip/add_prev: the tag's number
    params: dict[str, Any] = field(default_factory=dict)


# The network of face_recognition.cpp, output side first, as nested (kind, arg) nodes.
def _block(filters: int, stride: int, below: list[Any]) -> list[Any]:
    # BN<con<N,3,3,1,1,relu<BN<con<N,3,3,stride,stride,SUBNET>>>>>
    return [
        ("affine", 0),
        ("con", (filters, 1)),
        ("relu", 0),
        ("affine", 0),
        ("con", (filters, stride)),
        *below,
    ]


def _ares(filters: int, below: list[Any]) -> list[Any]:
    # relu<add_prev1<block<N,affine,1,tag1<SUBNET>>>>
    return [("relu", 0), ("add_prev", 1), *_block(filters, 1, [("tag", 1), *below])]


def _ares_down(filters: int, below: list[Any]) -> list[Any]:
    # relu<add_prev2<avg_pool<2,2,2,2,skip1<tag2<block<N,affine,2,tag1<SUBNET>>>>>>>
    inner = [("tag", 2), *_block(filters, 2, [("tag", 1), *below])]
    return [("relu", 0), ("add_prev", 2), ("avg_pool", (2, 2)), ("skip", 1), *inner]


#: The levels from the input side (alevel4 .. alevel0): filters, whether the level starts
#: with a strided ``ares_down``, and how many plain ``ares`` blocks follow.
LEVELS = ((32, False, 3), (64, True, 3), (128, True, 2), (256, True, 2), (256, True, 0))


def _network() -> list[Any]:
    net: list[Any] = [("max_pool", (3, 2)), ("relu", 0), ("affine", 0), ("con", (32, 2))]
    for filters, down, blocks in LEVELS:
        if down:
            net = _ares_down(filters, net)
        for _ in range(blocks):
            net = _ares(filters, net)
    return [("fc", 128), ("avg_pool", (0, 0)), *net]


@dataclass
class Network:
    """The parsed network: the input's channel means and the layers, input side first."""

    means: tuple[float, float, float]
    layers: list[Layer]


def read(path: Path) -> Network:
    """Parse dlib's ``dlib_face_recognition_resnet_model_v1.dat``."""
    reader = _Reader(path.read_bytes())
    if reader.integer() != 1:
        raise FormatError("unknown add_loss_layer version")
    loss = reader.text()
    if loss == "loss_metric_2":
        reader.real(), reader.real()
    elif loss != "loss_metric_":
        raise FormatError(f"not a metric network: {loss}")
    layers: list[Layer] = []
    means = _read_nodes(reader, _network(), layers)
    if reader.pos != len(reader.data):
        raise FormatError(f"{len(reader.data) - reader.pos} bytes left after the network")
    return Network(means, layers)


def _read_nodes(reader: _Reader, nodes: list[Any], out: list[Layer]) -> tuple[float, float, float]:
    """Read the node at ``nodes[0]`` (its subnetwork first, as dlib writes it); append the
    layers to ``out`` input side first; return the input's channel means."""
    kind, arg = nodes[0]
    if kind in ("tag", "skip"):
        if reader.integer() != 1:
            raise FormatError(f"unknown {kind} version")
        means = _read_nodes(reader, nodes[1:], out)
        out.append(Layer(kind, tag=arg))
        return means
    version = reader.integer()
    if len(nodes) == 1:  # the layer over the input
        if version not in (2, 3):
            raise FormatError("unknown add_layer version over the input")
        if reader.text() != "input_rgb_image_sized":
            raise FormatError("the input is not input_rgb_image_sized")
        means = (reader.real(), reader.real(), reader.real())
        if (reader.integer(), reader.integer()) != (CHIP_SIZE, CHIP_SIZE):
            raise FormatError("the input is not 150 px")
    else:
        if version not in (1, 2):
            raise FormatError("unknown add_layer version")
        means = _read_nodes(reader, nodes[1:], out)
    out.append(_read_details(reader, kind, arg))
    for _ in range(3):  # setup called, gradient stale, output disabled
        reader.boolean()
    reader.tensor(), reader.tensor()  # x_grad, cached_output
    if len(nodes) == 1:
        reader.tensor()  # grad_final
        if version == 3:
            reader.integer()  # sample expansion factor
    elif version == 2:
        reader.tensor()  # params_grad
    return means


def _read_details(reader: _Reader, kind: str, arg: Any) -> Layer:
    name = reader.text()
    if kind == "con":
        if name not in ("con_4", "con_5", "con_6"):
            raise FormatError(f"unknown con version {name}")
        params = reader.tensor()
        filters = reader.integer()
        size = (reader.integer(), reader.integer())
        stride = (reader.integer(), reader.integer())
        padding = (reader.integer(), reader.integer())
        shape = reader.alias()
        reader.alias()  # biases
        for _ in range(4):
            reader.real()  # learning rate / weight decay multipliers
        use_bias = reader.boolean() if name in ("con_5", "con_6") else True
        if name == "con_6":
            reader.boolean()  # use_relu (a fused relu; never set by this network)
        if (filters, stride[0]) != arg or shape[0] != filters or tuple(shape[2:]) != size:
            raise FormatError("a convolution differs from face_recognition.cpp's network")
        flat = params.reshape(-1)
        weights = flat[: int(np.prod(shape))].reshape(shape)
        bias = flat[weights.size : weights.size + filters] if use_bias else np.zeros(filters)
        return Layer(
            kind,
            params={"w": weights, "b": bias.astype(np.float32), "stride": stride, "pad": padding},
        )
    if kind == "affine":
        if name not in ("affine_", "affine_2"):
            raise FormatError(f"unknown affine version {name}")
        params = reader.tensor().reshape(-1)
        gamma = reader.alias()
        reader.alias()
        reader.integer()  # mode (conv)
        disabled = reader.boolean() if name == "affine_2" else False
        channels = int(np.prod(gamma))
        return Layer(
            kind,
            params={
                "gamma": params[:channels],
                "beta": params[channels : 2 * channels],
                "disabled": disabled,
            },
        )
    if kind == "relu":
        if name == "relu_2":
            reader.boolean()
        elif name != "relu_":
            raise FormatError(f"unknown relu version {name}")
        return Layer(kind)
    if kind in ("max_pool", "avg_pool"):
        if name != f"{kind}_2":
            raise FormatError(f"unknown {kind} version {name}")
        size = (reader.integer(), reader.integer())
        stride = (reader.integer(), reader.integer())
        padding = (reader.integer(), reader.integer())
        if any(padding):
            raise FormatError("padded pooling is not in this network")
        return Layer(kind, params={"size": size, "stride": stride})
    if kind == "add_prev":
        if name != "add_prev_":
            raise FormatError(f"unknown add_prev version {name}")
        return Layer(kind, tag=arg)
    if kind == "fc":
        if name not in ("fc_2", "fc_3"):
            raise FormatError(f"unknown fc version {name}")
        outputs, inputs = reader.integer(), reader.integer()
        params = reader.tensor().reshape(-1)
        reader.alias(), reader.alias()
        if reader.integer() != 1:  # FC_NO_BIAS
            raise FormatError("the fc layer has a bias")
        for _ in range(4):
            reader.real()
        if name == "fc_3":
            reader.boolean()
        if outputs != arg:
            raise FormatError("the descriptor is not 128-d")
        return Layer(kind, params={"w": params[: inputs * outputs].reshape(inputs, outputs)})
    raise FormatError(f"unknown layer {kind}")


def onnx_model(network: Network) -> Any:
    """The network as an ONNX model: input ``chips`` (N, 150, 150, 3) uint8 RGB, output
    ``descriptors`` (N, 128) float32."""
    import onnx  # optional: only the recogniser's load builds the graph
    from onnx import TensorProto, helper, numpy_helper  # optional: as above

    nodes: list[Any] = []
    inits: list[Any] = []
    counter = iter(range(1 << 20))

    def name(prefix: str) -> str:
        return f"{prefix}_{next(counter)}"

    def const(value: np.ndarray[Any, Any], prefix: str = "c") -> str:
        label = name(prefix)
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), label))
        return label

    x = name("x")
    nodes.append(helper.make_node("Cast", ["chips"], [x], to=TensorProto.FLOAT))
    means = np.array(network.means, np.float32)
    y = name("x")
    nodes.append(helper.make_node("Sub", [x, const(means)], [y]))
    z = name("x")
    nodes.append(helper.make_node("Div", [y, const(np.array(256.0, np.float32))], [z]))
    current = name("x")
    nodes.append(helper.make_node("Transpose", [z], [current], perm=[0, 3, 1, 2]))
    shape = (3, CHIP_SIZE, CHIP_SIZE)  # (channels, rows, columns) of ``current``
    tags: dict[int, tuple[str, tuple[int, int, int]]] = {}

    for layer in network.layers:
        out = name(layer.kind)
        p = layer.params
        if layer.kind == "con":
            (sy, sx), (py, px) = p["stride"], p["pad"]
            w = p["w"]
            nodes.append(
                helper.make_node(
                    "Conv",
                    [current, const(w), const(p["b"])],
                    [out],
                    strides=[sy, sx],
                    pads=[py, px, py, px],
                    kernel_shape=list(w.shape[2:]),
                )
            )
            shape = (
                w.shape[0],
                (shape[1] + 2 * py - w.shape[2]) // sy + 1,
                (shape[2] + 2 * px - w.shape[3]) // sx + 1,
            )
        elif layer.kind == "affine":
            if p["disabled"]:
                continue
            scaled = name("x")
            gamma = p["gamma"].reshape(1, -1, 1, 1)
            nodes.append(helper.make_node("Mul", [current, const(gamma)], [scaled]))
            beta = p["beta"].reshape(1, -1, 1, 1)
            nodes.append(helper.make_node("Add", [scaled, const(beta)], [out]))
        elif layer.kind == "relu":
            nodes.append(helper.make_node("Relu", [current], [out]))
        elif layer.kind in ("max_pool", "avg_pool"):
            (ky, kx), (sy, sx) = p["size"], p["stride"]
            if ky == 0:  # avg_pool_everything
                nodes.append(helper.make_node("GlobalAveragePool", [current], [out]))
                shape = (shape[0], 1, 1)
            else:
                op = "MaxPool" if layer.kind == "max_pool" else "AveragePool"
                nodes.append(
                    helper.make_node(op, [current], [out], kernel_shape=[ky, kx], strides=[sy, sx])
                )
                shape = (shape[0], (shape[1] - ky) // sy + 1, (shape[2] - kx) // sx + 1)
        elif layer.kind == "tag":
            tags[layer.tag] = (current, shape)
            continue
        elif layer.kind == "skip":
            current, shape = tags[layer.tag]
            continue
        elif layer.kind == "add_prev":
            other, other_shape = tags[layer.tag]
            target = (
                max(shape[0], other_shape[0]),
                max(shape[1], other_shape[1]),
                max(shape[2], other_shape[2]),
            )
            a = _pad_to(nodes, const, current, shape, target)
            b = _pad_to(nodes, const, other, other_shape, target)
            nodes.append(helper.make_node("Add", [a, b], [out]))
            shape = target
        elif layer.kind == "fc":
            flat = name("x")
            nodes.append(helper.make_node("Flatten", [current], [flat], axis=1))
            nodes.append(helper.make_node("MatMul", [flat, const(p["w"])], [out]))
        current = out
    nodes.append(helper.make_node("Identity", [current], ["descriptors"]))
    graph = helper.make_graph(
        nodes,
        "dlib_face_recognition_resnet_model_v1",
        [
            helper.make_tensor_value_info(
                "chips", TensorProto.UINT8, [None, CHIP_SIZE, CHIP_SIZE, 3]
            )
        ],
        [helper.make_tensor_value_info("descriptors", TensorProto.FLOAT, [None, 128])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _pad_to(
    nodes: list[Any],
    const: Any,
    value: str,
    shape: tuple[int, int, int],
    target: tuple[int, int, int],
) -> str:
    """``value`` zero-padded at its end to ``target`` (dlib's add of unequal tensors)."""
    if shape == target:
        return value
    from onnx import helper  # optional: only the recogniser's load builds the graph

    grow = [t - s for s, t in zip(shape, target, strict=True)]
    pads = np.array([0, 0, 0, 0, 0, *grow], np.int64)
    out = f"{value}_padded"
    nodes.append(helper.make_node("Pad", [value, const(pads)], [out], mode="constant"))
    return out

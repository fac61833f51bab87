"""Plain factories of small ONNX files for the model API tests."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper


def identity_model(in_name: str, out_name: str, shape: list[object]) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Identity", [in_name], [out_name])],
        "m",
        [helper.make_tensor_value_info(in_name, TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def swapper_model(size: int) -> bytes:
    """inputs ``target`` 1×3×S×S and ``source`` 1×512; output = target."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["target"], ["output"])],
        "swap",
        [
            helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, size, size]),
            helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()

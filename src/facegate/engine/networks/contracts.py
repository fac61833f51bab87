"""The I/O contract each processor expects of an ONNX model of a given kind, checked before an
uploaded (tenant) model is accepted: input/output names, ranks and fixed sizes.

A dimension in a contract is an int (must match, or be symbolic in the file: dynamic axes are
allowed), ``None`` (anything), or a name shared by several dims (they must agree, e.g. the
square crop ``S``). The check returns the input spec recorded in the manifest (crop size).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import onnx

from facegate.engine.errors import ModelUnavailable
from facegate.engine.networks.live_portrait import (
    FEATURE_EXTRACTOR,
    FEED_SIZE,
    GENERATOR,
    MOTION_EXTRACTOR,
    PARTS,
)
from facegate.engine.networks.swap_models import SWAPPERS

Dim = int | str | None
Shape = tuple[Dim, ...]


@dataclass(frozen=True)
class Contract:
    """Required inputs and outputs (name -> shape); ``optional`` inputs may be absent."""

    inputs: dict[str, Shape | None]  # None: any shape
    outputs: dict[str, Shape | None]
    optional: frozenset[str] = frozenset()
    positional_outputs: int = 0  # >0: outputs are matched by position, any names


_IMAGE_S: Shape = (1, 3, "S", "S")
CONTRACTS: Mapping[str, Contract] = MappingProxyType(
    {
        "face_enhancer": Contract(
            {"input": _IMAGE_S, "weight": (1,)}, {"output": _IMAGE_S}, frozenset({"weight"})
        ),
        "frame_enhancer": Contract({"input": (1, 3, None, None)}, {"output": (1, 3, None, None)}),
        "face_recognizer": Contract({"input": (1, 3, 112, 112)}, {"output": (1, 512)}),
        "embedding_converter": Contract({"input": (1, 512)}, {"output": (1, 512)}),
        "age_modifier": Contract(
            {"target": _IMAGE_S, "target_with_background": (1, 3, None, None), "direction": None},
            {"output": (1, 3, None, None)},
            frozenset({"target_with_background"}),
        ),
    }
)


def swapper_contract(name: str) -> Contract:
    """face_swapper models are known by name (the name decides the pre/post-processing)."""
    spec = SWAPPERS.get(name)
    if spec is None:
        raise ModelUnavailable(
            f"a face_swapper model must use a known swapper name ({', '.join(sorted(SWAPPERS))})"
            f", not {name!r}"
        )
    size = spec.size
    source: Shape = (1, 512)
    if spec.type == "blendswap":
        source = (1, 3, 112, 112)
    elif spec.type == "uniface":
        source = (1, 3, 256, 256)
    return Contract(
        {"source": source, "target": (1, 3, size, size)}, {"output": (1, 3, size, size)}
    )


def live_portrait_contract(name: str) -> Contract:
    """The upload contract of one LivePortrait part (the expression restorer's)."""
    image = (1, 3, FEED_SIZE, FEED_SIZE)
    table = {
        FEATURE_EXTRACTOR: Contract({"input": image}, {"feature_volume": None}),
        MOTION_EXTRACTOR: Contract(
            {"input": image},
            {
                k: None
                for k in (
                    "pitch",
                    "yaw",
                    "roll",
                    "scale",
                    "translation",
                    "expression",
                    "motion_points",
                )
            },
            positional_outputs=7,
        ),
        GENERATOR: Contract(
            {"feature_volume": None, "source": (1, 21, 3), "target": (1, 21, 3)},
            {"output": (1, 3, None, None)},
        ),
    }
    if name not in table:
        raise ModelUnavailable(f"an expression_restorer part must be one of {', '.join(PARTS)}")
    return table[name]


def contract_for(kind: str, name: str) -> Contract:
    if kind == "face_swapper":
        return swapper_contract(name)
    if kind == "expression_restorer":
        return live_portrait_contract(name)
    found = CONTRACTS.get(kind)
    if found is None:
        known = ", ".join(sorted({"face_swapper", "expression_restorer", *CONTRACTS}))
        raise ModelUnavailable(f"models of kind {kind!r} cannot be uploaded (uploadable: {known})")
    return found


def _shape(value: onnx.ValueInfoProto) -> tuple[int | str, ...]:
    dims = value.type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)


def _match(
    label: str, actual: Sequence[int | str], wanted: Shape | None, sizes: dict[str, int]
) -> None:
    if wanted is None:
        return
    if len(actual) != len(wanted):
        raise ModelUnavailable(f"{label}: rank {len(actual)}, the contract needs {len(wanted)}")
    for got, want in zip(actual, wanted, strict=True):
        if want is None or isinstance(got, str):
            continue  # free in the contract, or dynamic in the file
        if isinstance(want, str):
            if sizes.setdefault(want, got) != got:
                raise ModelUnavailable(f"{label}: {got} but {want} was {sizes[want]} elsewhere")
        elif got != want:
            raise ModelUnavailable(
                f"{label}: shape {list(actual)}, the contract needs {list(wanted)}"
            )


def check_model_file(path: Path, kind: str, name: str) -> dict[str, Any]:
    """Parse ``path`` with onnx and check it against the contract of ``kind``/``name``;
    ModelUnavailable names the first mismatch. Returns the manifest input spec."""
    contract = contract_for(kind, name)
    try:
        model = onnx.load(str(path), load_external_data=False)
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx raises several unrelated types for a bad file
        raise ModelUnavailable(
            f"not a valid ONNX model: {str(exc).splitlines()[0][:200]}"
        ) from None
    initialisers = {i.name for i in model.graph.initializer}
    inputs = {i.name: _shape(i) for i in model.graph.input if i.name not in initialisers}
    outputs = [(o.name, _shape(o)) for o in model.graph.output]
    sizes: dict[str, int] = {}
    for input_name, wanted in contract.inputs.items():
        if input_name not in inputs:
            if input_name in contract.optional:
                continue
            raise ModelUnavailable(
                f"{kind} {name}: missing input {input_name!r} (has {sorted(inputs)})"
            )
        _match(f"{kind} {name}: input {input_name!r}", inputs[input_name], wanted, sizes)
    extra = sorted(set(inputs) - set(contract.inputs))
    if extra:
        raise ModelUnavailable(f"{kind} {name}: unexpected inputs {extra}")
    if contract.positional_outputs:
        if len(outputs) != contract.positional_outputs:
            raise ModelUnavailable(
                f"{kind} {name}: {len(outputs)} outputs, the contract needs "
                f"{contract.positional_outputs}"
            )
        for (out_name, shape), wanted in zip(outputs, contract.outputs.values(), strict=True):
            _match(f"{kind} {name}: output {out_name!r}", shape, wanted, sizes)
    else:
        if len(outputs) < len(contract.outputs):
            raise ModelUnavailable(f"{kind} {name}: needs {len(contract.outputs)} output(s)")
        # FaceFusion reads outputs by position: the first one is the result, whatever its name.
        for (out_name, shape), wanted in zip(outputs, contract.outputs.values(), strict=False):
            _match(f"{kind} {name}: output {out_name!r}", shape, wanted, sizes)
    return {"size": sizes["S"]} if "S" in sizes else {}

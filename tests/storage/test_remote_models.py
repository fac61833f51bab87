"""The model store kept in the object storage (FACEGATE_MODELS_IN_STORAGE, the cluster shape):
two processes with caches of their own (two pods' emptyDirs) share one store over the real S3
protocol (moto), and through the real API a tenant's upload is found by another replica."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from s3fixtures import make_s3_store, moto_client, moto_endpoint, s3_credentials  # noqa: F401
from storagefactories import S3Factory
from tests.conftest import make_settings
from tests.models.modelfiles import identity_model

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.store import ModelStore
from facegate.storage.base import ObjectStore
from facegate.storage.memory import MemoryStore
from facegate.storage.remote_models import ObjectStorageModels

ENHANCER = identity_model("input", "output", [1, 3, 512, 512])


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "s3"])
def objects(request: pytest.FixtureRequest) -> ObjectStore:
    if request.param == "memory":
        return MemoryStore()
    factory: S3Factory = request.getfixturevalue("make_s3_store")
    return factory()


def pod(objects: ObjectStore, cache: Path, clock: Clock) -> ModelStore:
    """One process's store: the shared objects, its own cache folder."""
    remote = ObjectStorageModels(objects, refresh_seconds=10, clock=clock)
    return ModelStore(cache, include_builtins=False, remote=remote)


def add(store: ModelStore, tmp_path: Path, name: str, tag: str, data: bytes, **kw: Any) -> Any:
    upload = tmp_path / f"upload-{name}-{tag}.onnx"
    upload.write_bytes(data)
    return store.add(name, tag, {"model": upload}, kind="face_enhancer", licence="test", **kw)


def test_a_model_added_on_one_pod_runs_on_another(objects: ObjectStore, tmp_path: Path) -> None:
    clock = Clock()
    api, worker = pod(objects, tmp_path / "api", clock), pod(objects, tmp_path / "worker", clock)
    add(api, tmp_path, "studio_enh", "v1", ENHANCER, tenant="acme")
    # Stored under the tenant's own prefix, the manifest last; the api keeps no copy.
    keys = objects.list("tenants/acme/models/")
    assert keys == [
        "tenants/acme/models/studio_enh/v1/manifest.json",
        "tenants/acme/models/studio_enh/v1/upload-studio_enh-v1.onnx",
    ]
    assert not (tmp_path / "api").exists() or not any((tmp_path / "api").rglob("*.onnx"))

    version = worker.resolve("studio_enh", tenant="acme")
    path = worker.verified_path(version)
    assert path.is_relative_to(tmp_path / "worker")
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(ENHANCER).digest()
    # Another tenant sees nothing of it, shared listings neither.
    with pytest.raises(ModelUnavailable, match="not installed"):
        worker.resolve("studio_enh", tenant="globex")
    assert [v.name for v in worker.list_models("globex")] == []
    assert [v.name for v in worker.list_models(None)] == []


def test_listings_are_trusted_for_a_while_but_a_named_tag_is_looked_up(
    objects: ObjectStore, tmp_path: Path
) -> None:
    clock = Clock()
    operator, worker = pod(objects, tmp_path / "op", clock), pod(objects, tmp_path / "w", clock)
    add(operator, tmp_path, "enh", "v1", ENHANCER)
    assert worker.tags("enh") == ["v1"]
    add(operator, tmp_path, "enh", "v2", ENHANCER)
    assert worker.tags("enh") == ["v1"]  # the worker's listing is 0 s old
    assert worker.resolve("enh", tag="v2").tag == "v2"  # asked by tag: looked up at once
    clock.now += 11
    assert worker.tags("enh") == ["v1", "v2"]
    assert worker.resolve("enh").tag == "v2"


def test_a_tampered_object_is_refused_and_fetched_again_once_repaired(
    objects: ObjectStore, tmp_path: Path
) -> None:
    clock = Clock()
    operator, worker = pod(objects, tmp_path / "op", clock), pod(objects, tmp_path / "w", clock)
    version = add(operator, tmp_path, "enh", "v1", ENHANCER)
    key = "models/enh/v1/" + version.file().path.name
    objects.put(key, ENHANCER[:-1] + b"\x00")
    resolved = worker.resolve("enh")
    with pytest.raises(ModelUnavailable, match="sha256 mismatch"):
        worker.verified_path(resolved)
    assert not resolved.file().path.exists()  # the bad copy is not kept
    objects.put(key, ENHANCER)
    assert worker.verified_path(resolved).read_bytes() == ENHANCER


def test_a_withdrawn_version_leaves_every_pod(objects: ObjectStore, tmp_path: Path) -> None:
    clock = Clock()
    api, worker = pod(objects, tmp_path / "api", clock), pod(objects, tmp_path / "w", clock)
    add(api, tmp_path, "mine", "v1", ENHANCER, tenant="acme")
    cached = worker.verified_path(worker.resolve("mine", tenant="acme"))
    with pytest.raises(ModelUnavailable, match="already exists"):
        add(worker, tmp_path, "mine", "v1", ENHANCER, tenant="acme")  # tags are immutable
    api.remove("mine", "v1", tenant="acme")
    assert objects.list("tenants/acme/models/") == []
    with pytest.raises(ModelUnavailable):
        api.remove("mine", "v1", tenant="acme")
    clock.now += 11
    with pytest.raises(ModelUnavailable, match="not installed"):
        worker.resolve("mine", tenant="acme")
    assert not cached.exists()  # the worker's cache dropped it


def test_a_manifest_cannot_name_a_file_outside_its_version(tmp_path: Path) -> None:
    objects = MemoryStore()
    manifest = {
        "kind": "face_enhancer",
        "files": [{"role": "model", "path": "../../../../etc/passwd", "sha256": "0" * 64}],
    }
    objects.put("models/evil/v1/manifest.json", json.dumps(manifest).encode())
    with pytest.raises(ModelUnavailable):
        pod(objects, tmp_path / "w", Clock()).resolve("evil")


def test_the_installation_store_follows_the_settings(tmp_path: Path) -> None:
    from facegate.models.installed import installation_model_store

    local = installation_model_store(make_settings(tmp_path, models_dir=tmp_path / "m"))
    assert local.remote is None
    remote = installation_model_store(
        make_settings(
            tmp_path, models_dir=tmp_path / "m", models_in_storage=True, storage_url="memory://"
        )
    )
    assert isinstance(remote.remote, ObjectStorageModels)
    assert remote is installation_model_store(
        make_settings(
            tmp_path, models_dir=tmp_path / "m", models_in_storage=True, storage_url="memory://"
        )
    )

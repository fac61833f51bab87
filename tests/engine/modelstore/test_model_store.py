from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.inference import InferencePool, PoolSettings
from facegate.engine.modelstore.manifest import read_manifest
from facegate.engine.modelstore.store import ModelStore
from facegate.engine.modelstore.tags import ModelRequest, TagPolicy, choose_variant
from onnx_graphs import identity_graph


def create_store(tmp_path: Path) -> ModelStore:
    return ModelStore(tmp_path / "models", include_builtins=False)


def create_graph(tmp_path: Path, name: str = "g.onnx") -> Path:
    return identity_graph(tmp_path / name, "input", "output", [1, 3])


def test_add_then_resolve_verifies_sha256(tmp_path: Path) -> None:
    store = create_store(tmp_path)
    store.add(
        "gfpgan_1.4",
        "v1",
        {"model": create_graph(tmp_path)},
        kind="face_enhancer",
        licence="Apache-2.0",
    )
    version = store.resolve("gfpgan_1.4")
    assert (version.tag, version.kind, version.licence) == ("v1", "face_enhancer", "Apache-2.0")
    path = store.verified_path(version)
    assert path == tmp_path / "models" / "gfpgan_1.4" / "v1" / "g.onnx"


def test_tampered_file_is_refused_with_clear_message(tmp_path: Path) -> None:
    store = create_store(tmp_path)
    store.add("m", "v1", {"model": create_graph(tmp_path)}, kind="face_enhancer", licence="x")
    target = tmp_path / "models" / "m" / "v1" / "g.onnx"
    target.write_bytes(target.read_bytes() + b"tampered")
    with pytest.raises(ModelUnavailable, match=r"sha256 mismatch for g\.onnx"):
        store.verified_path(store.resolve("m"))


def test_missing_model_and_tag_are_named(tmp_path: Path) -> None:
    store = create_store(tmp_path)
    with pytest.raises(ModelUnavailable, match="'absent' is not installed"):
        store.resolve("absent")
    store.add("m", "v1", {"model": create_graph(tmp_path)}, kind="face_enhancer", licence="x")
    with pytest.raises(ModelUnavailable, match="no tag 'v3'"):
        store.resolve("m", tag="v3")


def test_tags_side_by_side_newest_wins_unless_pinned(tmp_path: Path) -> None:
    store = create_store(tmp_path)
    for tag in ("v2", "v10", "v1"):
        store.add("m", tag, {"model": create_graph(tmp_path)}, kind="face_enhancer", licence="x")
    assert store.tags("m") == ["v1", "v2", "v10"]
    assert store.resolve("m").tag == "v10"
    assert store.resolve("m", policy=TagPolicy(default_tag="v1")).tag == "v1"
    assert store.resolve("m", policy=TagPolicy(default_tag="v1", pins={"m": "v2"})).tag == "v2"
    # MODEL_TAG naming a tag this model lacks falls back to the newest
    assert store.resolve("m", policy=TagPolicy(default_tag="v7")).tag == "v10"


def test_ab_split_is_deterministic_and_weighted(tmp_path: Path) -> None:
    store = create_store(tmp_path)
    for tag in ("v1", "v2"):
        store.add("m", tag, {"model": create_graph(tmp_path)}, kind="face_enhancer", licence="x")
    policy = TagPolicy(splits={"m": {"v1": 0.8, "v2": 0.2}})
    chosen = [store.resolve("m", policy=policy, job_id=f"job-{i}").tag for i in range(2000)]
    assert chosen == [store.resolve("m", policy=policy, job_id=f"job-{i}").tag for i in range(2000)]
    share = chosen.count("v2") / len(chosen)
    assert 0.17 < share < 0.23
    assert choose_variant("m", "job-1", {"v1": 0.0, "v2": 1.0}) == "v2"


def test_tenant_private_models_are_visible_only_to_that_tenant(tmp_path: Path) -> None:
    store = create_store(tmp_path)
    store.add("m", "v1", {"model": create_graph(tmp_path)}, kind="face_enhancer", licence="x")
    store.add(
        "mine",
        "v1",
        {"model": create_graph(tmp_path)},
        kind="face_enhancer",
        licence="x",
        tenant="acme",
    )
    store.add(
        "m",
        "custom",
        {"model": create_graph(tmp_path)},
        kind="face_enhancer",
        licence="x",
        tenant="acme",
    )
    assert store.resolve("mine", tenant="acme").tenant == "acme"
    with pytest.raises(ModelUnavailable):
        store.resolve("mine", tenant="globex")
    with pytest.raises(ModelUnavailable):
        store.resolve("mine")
    assert store.resolve("m", tenant="acme").tag == "custom"  # private shadows shared
    assert store.resolve("m", tenant="globex").tag == "v1"
    assert {v.name for v in store.list_models()} == {"m"}
    assert {v.name for v in store.list_models("acme")} == {"m", "mine"}


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", "tenants", ""])
def test_unsafe_names_are_refused(tmp_path: Path, bad: str) -> None:
    store = create_store(tmp_path)
    with pytest.raises(ModelUnavailable):
        store.add(bad, "v1", {"model": create_graph(tmp_path)}, kind="face_enhancer", licence="x")
    with pytest.raises(ModelUnavailable):
        store.resolve("m", tenant=bad or "../a")


def test_builtins_are_found_and_verify() -> None:
    store = ModelStore(Path("/nonexistent"))
    names = {v.name for v in store.list_models()}
    assert {"open_nsfw", "real_esrgan_x4plus", "realesr_animevideov3_x2"} <= names
    version = store.resolve("realesr_animevideov3_x2")
    store.verify(version)
    assert version.file("param").path.name == "realesr-animevideov3-x2.param"


def test_pool_shares_one_session_and_evicts_lru(tmp_path: Path) -> None:
    store = create_store(tmp_path)
    for name in ("a", "b", "c"):
        store.add(
            name,
            "v1",
            {"model": create_graph(tmp_path, f"{name}.onnx")},
            kind="face_enhancer",
            licence="x",
        )
    size = store.resolve("a").size_bytes
    pool = InferencePool(PoolSettings(max_bytes=size * 2))
    hub = ModelHub(store, pool)
    first = hub.onnx("a", ModelRequest(tenant="t1"))
    assert hub.onnx("a", ModelRequest(tenant="t2")).session is first.session
    out = first.run({"input": np.ones((1, 3), np.float32)})[0]
    np.testing.assert_array_equal(out, np.ones((1, 3), np.float32))
    hub.onnx("b")
    hub.onnx("c")  # over budget: "a", least recently used, goes
    assert len(pool) == 2
    assert pool.stats.evictions == 1
    assert hub.onnx("a").session is not first.session


def test_installation_model_tag_applies_where_the_tenant_names_none(tmp_path: Path) -> None:
    store = create_store(tmp_path)
    for tag in ("v1", "v2"):
        store.add("m", tag, {"model": create_graph(tmp_path)}, kind="face_enhancer", licence="x")
    hub = ModelHub(store, default_tag="v1")  # MODEL_TAG=v1 for the whole installation
    assert hub.resolve("m").tag == "v1"
    assert hub.resolve("m", ModelRequest(policy=TagPolicy(pins={"other": "v2"}))).tag == "v1"
    # a tenant's own MODEL_TAG or pin wins over the installation's
    assert hub.resolve("m", ModelRequest(policy=TagPolicy(default_tag="v2"))).tag == "v2"
    assert hub.resolve("m", ModelRequest(policy=TagPolicy(pins={"m": "v2"}))).tag == "v2"
    assert ModelHub(store).resolve("m").tag == "v2"  # no MODEL_TAG: the newest


def test_a_yaml_manifest_is_read_and_a_broken_one_is_named(tmp_path: Path) -> None:
    """Manifests may be YAML (the parser is imported only for them)."""
    store = create_store(tmp_path)
    files = {"model": create_graph(tmp_path)}
    store.add("gfpgan_1.4", "v1", files, kind="face_enhancer", licence="Apache-2.0")
    version_dir = tmp_path / "models" / "gfpgan_1.4" / "v1"
    (manifest,) = [p for p in version_dir.iterdir() if p.name.startswith("manifest.")]
    as_yaml = version_dir / "manifest.yaml"
    as_yaml.write_text(manifest.read_text())  # JSON is YAML
    manifest.unlink()
    assert read_manifest(version_dir).kind == "face_enhancer"
    as_yaml.write_text("kind: [unclosed\n")
    with pytest.raises(ModelUnavailable, match="unreadable manifest"):
        read_manifest(version_dir)

"""The ObjectStore contract on every adapter (local, memory, S3 in both layouts); LocalStore:
key validation, containment after resolving (symlinks), atomic writes."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import s3fixtures

from facegate.resilience import BreakerConfig
from facegate.storage.base import InvalidKey, ObjectNotFound, ObjectStore
from facegate.storage.factory import store_from_url
from facegate.storage.local import LocalStore
from facegate.storage.memory import MemoryStore

# Fixtures are found by name in the test module.
moto_endpoint = s3fixtures.moto_endpoint
moto_client = s3fixtures.moto_client
s3_credentials = s3fixtures.s3_credentials
make_s3_store = s3fixtures.make_s3_store

BAD_KEYS = [
    "",
    "/etc/passwd",
    "../outside",
    "a/../../outside",
    "a/./b",
    "a//b",
    "a/b/",
    ".hidden",
    "a/.hidden",
    "a\\b",
    "a/b\x00c",
    "ä/b",
    "a b",
    "x" * 200,
    "/".join(["a"] * 20),
]


@pytest.fixture(params=["local", "memory", "s3", "s3-tenant-buckets"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """The same contract for every adapter; S3 through moto's server on loopback."""
    if request.param == "local":
        return LocalStore(tmp_path / "root")
    if request.param == "memory":
        return MemoryStore()
    make_s3_store = request.getfixturevalue("make_s3_store")
    if request.param == "s3":
        return make_s3_store()  # type: ignore[no-any-return]
    suffix = uuid.uuid4().hex[:8]
    return make_s3_store(tenant_bucket=f"fg-{suffix}-{{tenant}}")  # type: ignore[no-any-return]


def test_round_trip(store: ObjectStore) -> None:
    assert store.put("tenants/a/inputs/x/target", b"hello") == 5
    assert store.get("tenants/a/inputs/x/target") == b"hello"
    assert store.size("tenants/a/inputs/x/target") == 5
    assert store.exists("tenants/a/inputs/x/target")
    with store.open("tenants/a/inputs/x/target") as handle:
        assert handle.read() == b"hello"
    assert store.put_stream("tenants/a/inputs/x/big", [b"ab"] * 1000) == 2000
    assert b"".join(store.iter_chunks("tenants/a/inputs/x/big", 300)) == b"ab" * 1000
    assert store.list("tenants/a/") == ["tenants/a/inputs/x/big", "tenants/a/inputs/x/target"]
    assert store.list("tenants/b/") == []
    assert store.delete("tenants/a/inputs/x/target")
    assert not store.delete("tenants/a/inputs/x/target")
    assert not store.exists("tenants/a/inputs/x/target")
    with pytest.raises(ObjectNotFound):
        store.get("tenants/a/inputs/x/target")


def test_list_objects_gives_size_and_last_write(store: ObjectStore) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)  # S3 keeps whole seconds
    store.put("tenants/b/outputs/y/result.png", b"abc")
    store.put("tenants/a/inputs/x/target", b"hello")
    store.put("models/m/v1/manifest.json", b"{}")
    listed = store.list_objects("tenants/")
    assert [(item.key, item.size) for item in listed] == [
        ("tenants/a/inputs/x/target", 5),
        ("tenants/b/outputs/y/result.png", 3),
    ]
    after = datetime.now(UTC) + timedelta(seconds=5)
    assert all(before <= item.modified <= after for item in listed)
    assert all(item.modified.utcoffset() == timedelta(0) for item in listed)
    assert store.list_objects("tenants/c/") == []


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_keys_refused_everywhere(store: ObjectStore, key: str) -> None:
    for call in (store.get, store.exists, store.delete, store.size):
        with pytest.raises(InvalidKey):
            call(key)
    with pytest.raises(InvalidKey):
        store.put(key, b"x")


def test_bad_prefix_refused(store: ObjectStore) -> None:
    for prefix in ("../", "/abs/", "a", "a/../"):
        with pytest.raises(InvalidKey):
            store.list(prefix)


def test_symlink_escape_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"other tenant")
    store = LocalStore(root)
    (root / "tenants").mkdir()
    os.symlink(outside, root / "tenants" / "evil")
    with pytest.raises(InvalidKey):
        store.get("tenants/evil/secret")
    with pytest.raises(InvalidKey):
        store.put("tenants/evil/planted", b"x")
    assert not (outside / "planted").exists()
    os.symlink(outside / "secret", root / "tenants" / "link")
    with pytest.raises(InvalidKey):
        store.get("tenants/link")


def test_a_symlink_into_another_tenants_folder_is_refused(tmp_path: Path) -> None:
    """Inside the root, but outside the key's tenant: a link from one tenant's folder to
    another's is not followed (reads, writes, deletes), whichever component it is."""
    store = LocalStore(tmp_path / "root")
    store.put("tenants/other/inputs/j1/target", b"the other tenant's")
    root = tmp_path / "root"
    (root / "tenants" / "acme" / "inputs").mkdir(parents=True)
    os.symlink(root / "tenants" / "other" / "inputs" / "j1", root / "tenants/acme/inputs/j1")
    os.symlink(root / "tenants" / "other", root / "tenants" / "acme" / "outputs")
    for key in ("tenants/acme/inputs/j1/target", "tenants/acme/outputs/inputs/j1/target"):
        for call in (store.get, store.exists, store.size, store.delete):
            with pytest.raises(InvalidKey, match="tenant"):
                call(key)
        with pytest.raises(InvalidKey):
            store.put(key.replace("target", "planted"), b"x")
    assert store.get("tenants/other/inputs/j1/target") == b"the other tenant's"
    assert not (root / "tenants/other/inputs/j1/planted").exists()


def test_a_symlink_within_the_tenants_folder_is_followed(tmp_path: Path) -> None:
    """A link is checked, not refused: one that stays in its tenant's folder is read."""
    store = LocalStore(tmp_path / "root")
    store.put("tenants/acme/inputs/j1/target", b"ours")
    jobs = tmp_path / "root" / "tenants" / "acme" / "inputs"
    os.symlink(jobs / "j1", jobs / "j2")
    assert store.get("tenants/acme/inputs/j2/target") == b"ours"
    store.put("tenants/acme/inputs/j2/source-0", b"also ours")
    assert (jobs / "j1" / "source-0").read_bytes() == b"also ours"


def test_root_itself_is_not_an_object(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root")
    (tmp_path / "root" / "a").mkdir()
    with pytest.raises(ObjectNotFound):
        store.get("a")


def test_delete_prunes_empty_folders(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root")
    store.put("tenants/a/inputs/j/target", b"x")
    store.delete("tenants/a/inputs/j/target")
    assert list((tmp_path / "root").iterdir()) == []


def test_store_from_url(tmp_path: Path) -> None:
    local = store_from_url(f"file://{tmp_path}/s", BreakerConfig())
    assert isinstance(local, LocalStore)
    assert local.root == (tmp_path / "s").resolve()
    assert isinstance(store_from_url("memory://", BreakerConfig()), MemoryStore)

"""The specification's environment names map onto FACEGATE_* settings."""

from __future__ import annotations

import pytest

from facegate.deploy.env import SpecEnvError, apply_spec_env


def test_spec_names_become_facegate_settings() -> None:
    env = apply_spec_env(
        {
            "TENANT_ID": "tenant-a",
            "MODEL_PATH": "/models/tenant-a/",
            "OUTPUT_DIR": "/storage/output/tenant-a",
            "MODEL_TAG": "v2",
            "OTHER": "kept",
        }
    )
    assert env["FACEGATE_WORKER_TENANTS"] == "tenant-a"
    assert env["FACEGATE_MODELS_DIR"] == "/models/tenant-a"
    assert env["FACEGATE_STORAGE_URL"] == "file:///storage/output/tenant-a"
    assert env["FACEGATE_MODEL_TAG"] == "v2"
    assert env["OTHER"] == "kept"


def test_unset_or_empty_spec_names_change_nothing() -> None:
    assert apply_spec_env({"TENANT_ID": " ", "FACEGATE_PORT": "1"}) == {
        "TENANT_ID": " ",
        "FACEGATE_PORT": "1",
    }


def test_an_equal_explicit_value_is_fine_and_kept() -> None:
    env = apply_spec_env({"MODEL_PATH": "/models/", "FACEGATE_MODELS_DIR": "/models"})
    assert env["FACEGATE_MODELS_DIR"] == "/models"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"TENANT_ID": "a", "FACEGATE_WORKER_TENANTS": "b"}, "contradicts"),
        ({"OUTPUT_DIR": "/x", "FACEGATE_STORAGE_URL": "s3://bucket"}, "contradicts"),
        ({"TENANT_ID": "Tenant_A"}, "not a tenant id"),
        ({"TENANT_ID": "a;rm -rf"}, "not a tenant id"),
        ({"MODEL_PATH": "relative/models"}, "absolute path"),
        ({"MODEL_TAG": "../v1"}, "not a model tag"),
    ],
)
def test_malformed_or_conflicting_values_are_refused(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SpecEnvError, match=message):
        apply_spec_env(environ)


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_TAG", "v1")
    monkeypatch.delenv("FACEGATE_MODEL_TAG", raising=False)
    assert apply_spec_env()["FACEGATE_MODEL_TAG"] == "v1"

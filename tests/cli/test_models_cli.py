from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from facegate.cli import main


def test_models_add_list_verify(tmp_path: Path) -> None:
    weights = tmp_path / "gfpgan_1.4.onnx"
    weights.write_bytes(b"not really onnx, the store only checks sha256")
    store = str(tmp_path / "models")
    # models add records its audit event in this database
    runner = CliRunner(env={"FACEGATE_DATABASE_URL": f"sqlite:///{tmp_path}/facegate.db"})
    added = runner.invoke(
        main,
        [
            "models",
            "add",
            "--models-dir",
            store,
            "gfpgan_1.4",
            str(weights),
            "--tag",
            "v1",
            "--kind",
            "face_enhancer",
            "--licence",
            "Apache-2.0",
            "--tenant",
            "acme",
        ],
    )
    assert added.exit_code == 0, added.output
    assert "sha256=" in added.output
    listed = runner.invoke(
        main, ["models", "list", "--models-dir", store, "--tenant", "acme", "--json"]
    )
    rows = [json.loads(line) for line in listed.output.splitlines()]
    mine = [r for r in rows if r["name"] == "gfpgan_1.4"]
    assert mine[0]["owner"] == "acme"
    shared = runner.invoke(main, ["models", "list", "--models-dir", store, "--json"])
    assert "gfpgan_1.4" not in shared.output
    ok = runner.invoke(
        main, ["models", "verify", "--models-dir", store, "--tenant", "acme", "gfpgan_1.4"]
    )
    assert ok.exit_code == 0
    stored = tmp_path / "models" / "tenants" / "acme" / "gfpgan_1.4" / "v1" / weights.name
    stored.write_bytes(b"swapped")
    bad = runner.invoke(main, ["models", "verify", "--models-dir", store, "--tenant", "acme"])
    assert bad.exit_code == 1
    assert "sha256 mismatch" in bad.output

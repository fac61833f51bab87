"""`facegate provenance init|rotate` and `facegate verify FILE` (the operator's view)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import cv2
import pytest
from click.testing import CliRunner
from tests.testdata import FACES

from facegate.cli import main
from facegate.database import create_engine_from_url, create_session_factory, migrate, session_scope
from facegate.engine.watermark import embed_watermark
from facegate.provenance.keys import CA_FILE, MARK_KEY_FILE, load_keys
from facegate.provenance.manifest import manifest_definition, sign_bytes
from facegate.provenance.marker import JobMark, ResultMarker
from facegate.provenance.payload import WATERMARK
from facegate.provenance.repository import MarkRepository


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    url = f"sqlite:///{tmp_path}/facegate.db"
    monkeypatch.setenv("FACEGATE_DATABASE_URL", url)
    monkeypatch.setenv("FACEGATE_PROVENANCE_DIR", str(tmp_path / "keys"))
    migrate(url)
    return tmp_path


def run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(map(str, args)))
    return result.exit_code, result.output


def marked_file(folder: Path, job_id: uuid.UUID) -> Path:
    """A JPEG marked as a worker marks a result: watermark in the pixels, then the manifest."""
    keys = load_keys(folder / "keys")
    engine = create_engine_from_url(f"sqlite:///{folder}/facegate.db")
    with session_scope(create_session_factory(engine)) as session:
        row = MarkRepository(session).issue("studio", job_id)
        installation = ResultMarker(keys).installation_id
        mark = JobMark(installation, row.serial, row.reference, keys.mac_key(WATERMARK))
    engine.dispose()
    frame = embed_watermark(cv2.imread(str(FACES / "man_frontal_glasses.jpg")), mark.bits)
    data = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
    path = folder / "result.jpg"
    path.write_bytes(
        sign_bytes(keys, data, "jpeg", manifest_definition(mark.urn, ["face_swapper"]))
    )
    return path


def test_init_rotate_and_verify(env: Path) -> None:
    code, output = run("provenance", "init")
    assert code == 0, output
    installation = load_keys(env / "keys").installation_id
    assert f"{installation:04x}" in output
    code, output = run("provenance", "init")
    assert code == 1
    assert "already holds" in output

    job_id = uuid.uuid4()
    path = marked_file(env, job_id)
    code, output = run("verify", path)
    assert code == 0, output
    result = json.loads(output)
    assert result["manifest"]["state"] == "valid"
    assert result["watermark"]["found"]
    assert result["job"]["job_id"] == str(job_id)
    assert result["job"]["tenant_id"] == "studio"

    # Rotation: a new signing certificate under the same CA; older files still verify.
    ca = (env / "keys" / CA_FILE).read_bytes()
    code, output = run("provenance", "rotate")
    assert code == 0, output
    assert load_keys(env / "keys").installation_id == installation
    assert (env / "keys" / CA_FILE).read_bytes() == ca
    code, output = run("verify", path)
    assert code == 0, output
    assert sorted(json.loads(output)["job"]["traced_by"]) == ["manifest", "watermark"]

    # An identity made before mark.key existed: rotate writes the same key (derived from
    # the CA), so the watermarks issued before still verify.
    mark_key = env / "keys" / MARK_KEY_FILE
    issued = mark_key.read_bytes()
    mark_key.unlink()
    code, output = run("provenance", "rotate")
    assert code == 0, output
    assert mark_key.read_bytes() == issued
    assert mark_key.stat().st_mode & 0o077 == 0

    code, output = run("verify", FACES / "woman_astronaut_frontal.jpg")
    assert code == 1
    assert not json.loads(output)["made_by_this_installation"]

    truncated = env / "truncated.jpg"
    truncated.write_bytes(path.read_bytes()[:2000])
    code, output = run("verify", truncated)
    assert code == 2
    assert output.startswith("error:")

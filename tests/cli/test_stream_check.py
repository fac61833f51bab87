"""``facegate stream-check`` against a real server (uvicorn on a free port, a tenant with
live on): it streams a photo, prints what came back and saves the last swapped frame."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
from click.testing import CliRunner
from tests.conftest import make_settings
from tests.liveserver import serving
from tests.streams.streamkit import CAMERA_PHOTO, LIVE_POLICY, SOURCE_PHOTO

from facegate.api.app import create_app
from facegate.cli import main
from facegate.database import session_scope
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService


def check_args(url: str, token: str) -> list[str]:
    camera, source = str(CAMERA_PHOTO), str(SOURCE_PHOTO)
    return ["stream-check", "--url", url, "--key", token, "--camera", camera, "--source", source]


def test_stream_check_prints_frames_and_saves_one(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path), services=[])
    with serving(app) as url:
        state: Any = app.state.facegate
        with session_scope(state.session_factory) as session:
            service = TenancyService(session)
            service.create_tenant(TenantSpec(id="live", policy=PolicySpec(**LIVE_POLICY)))
            token = service.create_key("live", KeyCreate(scopes=["director"])).token
        saved = tmp_path / "last.png"
        result = CliRunner().invoke(
            main,
            [*check_args(url, token), "--seconds", "2", "--save", str(saved)],
        )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["frames_received"] > 0
    assert summary["end_reason"] == "deleted"
    assert summary["latency_ms_p95"] > 0
    assert cv2.imread(str(saved)).shape == (480, 640, 3)


def test_stream_check_says_why_a_start_was_refused(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path), services=[])
    with serving(app) as url:
        state: Any = app.state.facegate
        with session_scope(state.session_factory) as session:
            service = TenancyService(session)
            service.create_tenant(TenantSpec(id="nolive"))
            token = service.create_key("nolive", KeyCreate(scopes=["director"])).token
        result = CliRunner().invoke(
            main,
            check_args(url, token),
        )
    assert result.exit_code == 1
    assert "403" in result.output
    assert "max_concurrent_streams" in result.output

"""Plain helpers for jobs API tests: small real photos, multipart bodies, waiting, and
looking at what a test left in the database and the storage folder."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
from PIL import Image
from sqlalchemy import func, select
from tests.testdata import FACES

from facegate.database import session_scope
from facegate.jobs.tables import Job
from facegate.state import AppState
from facegate.storage.tables import StoredObject

DEBUG_TENANT_POLICY: dict[str, Any] = {
    "allowed_processors": ["face_swapper", "face_debugger"],
    "max_concurrent_jobs": 2,
}
TERMINAL = {"succeeded", "failed", "cancelled"}


def photo(name: str = "woman_astronaut_frontal.jpg", width: int = 160) -> bytes:
    """A real face photo, downscaled so a job on it is quick."""
    image = Image.open(FACES / name).convert("RGB")
    height = round(image.height * width / image.width)
    out = io.BytesIO()
    image.resize((width, height)).save(out, "JPEG", quality=90)
    return out.getvalue()


def job_files(
    target: bytes, sources: list[bytes] | None = None, name: str = "t.jpg"
) -> list[tuple[str, tuple[str, bytes, str]]]:
    files = [("source", (f"s{i}.jpg", data, "image/jpeg")) for i, data in enumerate(sources or [])]
    files.append(("target", (name, target, "image/jpeg")))
    return files


def debug_options(**extra: Any) -> dict[str, str]:
    return {"options": json.dumps({"processors": ["face_debugger"], **extra})}


async def submit(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    target: bytes | None = None,
    sources: list[bytes] | None = None,
    data: dict[str, str] | None = None,
) -> httpx.Response:
    return await client.post(
        "/v1/jobs",
        headers=headers,
        files=job_files(target if target is not None else photo(), sources),
        data=data if data is not None else debug_options(),
    )


async def wait_terminal(
    client: httpx.AsyncClient, headers: dict[str, str], job_id: str, timeout: float = 120.0
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        body: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}", headers=headers)).json()
        if body["status"] in TERMINAL or loop.time() > deadline:
            return body
        await asyncio.sleep(0.1)


async def wait_batch(
    client: httpx.AsyncClient, headers: dict[str, str], batch_id: str, timeout: float = 300.0
) -> dict[str, Any]:
    """The batch once every item has ended (AssertionError past ``timeout``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    batch: dict[str, Any] = {}
    while loop.time() < deadline:
        batch = (await client.get(f"/v1/batches/{batch_id}", headers=headers)).json()
        if batch["status"] == "completed":
            return batch
        await asyncio.sleep(0.1)
    raise AssertionError(f"batch {batch_id} did not complete: {batch.get('counts')}")


def count_jobs(state: AppState) -> int:
    with session_scope(state.session_factory) as session:
        return int(session.execute(select(func.count()).select_from(Job)).scalar_one())


def count_objects(state: AppState) -> int:
    with session_scope(state.session_factory) as session:
        return int(session.execute(select(func.count()).select_from(StoredObject)).scalar_one())


def stored_files(state: AppState) -> list[Path]:
    root = Path(state.settings.storage_url.removeprefix("file://"))
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def is_problem(response: httpx.Response) -> bool:
    body = response.json()
    return (
        response.headers["content-type"].startswith("application/problem+json")
        and body["status"] == response.status_code
        and isinstance(body.get("type"), str)
        and isinstance(body.get("detail"), str)
    )


def load_badmedia() -> ModuleType:
    """tests/engine/badmedia.py (the engine's catalogue of bad uploads)."""
    path = Path(__file__).resolve().parents[1] / "engine" / "badmedia.py"
    spec = importlib.util.spec_from_file_location("badmedia", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

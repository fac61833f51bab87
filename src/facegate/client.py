"""A Python client of the facegate API (httpx): jobs, batches, the face library, job
templates and webhooks, plus the receiver's signature check (:func:`verify_webhook`).

Every call it makes is one of :data:`OPERATIONS`, checked against the service's OpenAPI
document by the tests, so the client cannot drift from the API it talks to::

    with FacegateClient("http://127.0.0.1:8000", api_key) as fg:
        face = fg.save_face("lead.jpg", name="Lead")
        batch = fg.submit_batch(["a.jpg", "b.jpg"], source_face_ids=[face["id"]])
        batch = fg.wait_batch(batch["id"])
        Path("results.zip").write_bytes(fg.batch_archive(batch["id"]))
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from facegate.webhooks.signing import InvalidSignature
from facegate.webhooks.signing import verify as verify_webhook

__all__ = ["OPERATIONS", "FacegateClient", "FacegateError", "InvalidSignature", "verify_webhook"]

#: (method, path template) of every call the client makes.
OPERATIONS: dict[str, tuple[str, str]] = {
    "submit_job": ("POST", "/v1/jobs"),
    "get_job": ("GET", "/v1/jobs/{job_id}"),
    "cancel_job": ("DELETE", "/v1/jobs/{job_id}"),
    "job_result": ("GET", "/v1/jobs/{job_id}/result"),
    "submit_batch": ("POST", "/v1/batches"),
    "get_batch": ("GET", "/v1/batches/{batch_id}"),
    "cancel_batch": ("DELETE", "/v1/batches/{batch_id}"),
    "batch_archive": ("GET", "/v1/batches/{batch_id}/archive"),
    "save_face": ("POST", "/v1/faces/library"),
    "list_faces": ("GET", "/v1/faces/library"),
    "rename_face": ("PATCH", "/v1/faces/library/{face_id}"),
    "delete_face": ("DELETE", "/v1/faces/library/{face_id}"),
    "create_template": ("POST", "/v1/templates"),
    "list_templates": ("GET", "/v1/templates"),
    "get_template": ("GET", "/v1/templates/{template_id}"),
    "delete_template": ("DELETE", "/v1/templates/{template_id}"),
    "create_webhook": ("POST", "/v1/webhooks"),
    "list_deliveries": ("GET", "/v1/webhooks/deliveries"),
}
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
Media = bytes | str | Path


class FacegateError(Exception):
    """A refused call: the HTTP status and the problem document (RFC 9457)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(f"{status} {problem.get('type', '')}: {problem.get('detail', '')}")
        self.status = status
        self.problem = problem


def _bytes(media: Media) -> bytes:
    return media if isinstance(media, bytes) else Path(media).read_bytes()


class FacegateClient:
    """Synchronous; ``transport`` lets tests (or an app in the same process) be called
    without a network."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> FacegateClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _call(self, operation: str, *, path: dict[str, str] | None = None, **kwargs: Any) -> Any:
        method, template = OPERATIONS[operation]
        response = self.http.request(method, template.format(**(path or {})), **kwargs)
        if response.is_redirect and method == "GET":  # S3: a presigned URL of the bytes
            response = httpx.get(response.headers["location"], timeout=self.http.timeout)
        if response.is_error:
            try:
                problem = response.json()
            except ValueError:
                problem = {"detail": response.text[:200]}
            raise FacegateError(response.status_code, problem)
        if response.status_code == 204:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.content

    @staticmethod
    def _sources(
        sources: Sequence[Media],
        source_face_ids: Sequence[str],
        options: dict[str, Any] | None,
        template: str | None = None,
    ) -> tuple[list[tuple[str, tuple[str, bytes]]], dict[str, Any]]:
        files = [("source", (f"s{i}", _bytes(s))) for i, s in enumerate(sources)]
        data: dict[str, Any] = {"source_face_id": list(source_face_ids)} if source_face_ids else {}
        if options is not None:
            data["options"] = json.dumps(options)
        if template is not None:
            data["template"] = template
        return files, data

    @staticmethod
    def _idempotency(key: str | None) -> dict[str, str]:
        return {"Idempotency-Key": key} if key else {}

    # jobs
    def submit_job(
        self,
        target: Media,
        *,
        sources: Sequence[Media] = (),
        source_face_ids: Sequence[str] = (),
        options: dict[str, Any] | None = None,
        template: str | None = None,
        idempotency_key: str | None = None,
        reference: Media | None = None,
    ) -> dict[str, Any]:
        """Queue a job. ``reference``: with ``options["selector"]["mode"] == "reference"``,
        an image of the person whose faces are replaced."""
        files, data = self._sources(sources, source_face_ids, options, template)
        files.append(("target", ("target", _bytes(target))))
        if reference is not None:
            files.append(("reference", ("reference", _bytes(reference))))
        job: dict[str, Any] = self._call(
            "submit_job", files=files, data=data, headers=self._idempotency(idempotency_key)
        )
        return job

    def get_job(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self._call("get_job", path={"job_id": job_id})
        return job

    def wait_job(self, job_id: str, timeout: float = 600.0, poll: float = 0.5) -> dict[str, Any]:
        """The job once it has ended (TimeoutError after ``timeout`` seconds)."""
        return self._wait(lambda: self.get_job(job_id), timeout, poll)

    def job_quality(self, job_id: str) -> list[dict[str, Any]]:
        """The quality report of each face a succeeded job swapped (docs/identity.md):
        ``d_source``, ``d_target``, ``tone``, ``yaw``, ``pitch``, ``verdict``
        (transferred / weak / not transferred) and ``action``; empty when it swapped none
        or has no result."""
        result = self.get_job(job_id).get("result") or {}
        quality: list[dict[str, Any]] = result.get("quality") or []
        return quality

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self._call("cancel_job", path={"job_id": job_id})
        return job

    def job_result(self, job_id: str) -> bytes:
        data: bytes = self._call("job_result", path={"job_id": job_id})
        return data

    # batches
    def submit_batch(
        self,
        targets: Iterable[Media],
        *,
        sources: Sequence[Media] = (),
        source_face_ids: Sequence[str] = (),
        options: dict[str, Any] | None = None,
        template: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        files, data = self._sources(sources, source_face_ids, options, template)
        files += [("target", (f"t{i}", _bytes(t))) for i, t in enumerate(targets)]
        batch: dict[str, Any] = self._call(
            "submit_batch", files=files, data=data, headers=self._idempotency(idempotency_key)
        )
        return batch

    def get_batch(self, batch_id: str) -> dict[str, Any]:
        batch: dict[str, Any] = self._call("get_batch", path={"batch_id": batch_id})
        return batch

    def wait_batch(
        self, batch_id: str, timeout: float = 3600.0, poll: float = 1.0
    ) -> dict[str, Any]:
        return self._wait(lambda: self.get_batch(batch_id), timeout, poll, done="completed")

    def cancel_batch(self, batch_id: str) -> dict[str, Any]:
        batch: dict[str, Any] = self._call("cancel_batch", path={"batch_id": batch_id})
        return batch

    def batch_archive(self, batch_id: str) -> bytes:
        """The ZIP of the batch's results so far."""
        data: bytes = self._call("batch_archive", path={"batch_id": batch_id})
        return data

    # the face library
    def save_face(
        self,
        image: Media,
        *,
        name: str,
        labels: Sequence[str] = (),
        face_index: int = 0,
        consent: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        data: dict[str, Any] = {"name": name, "labels": json.dumps(list(labels))}
        data["face_index"] = str(face_index)
        if consent is not None:
            data["consent"] = json.dumps(consent)
        face: dict[str, Any] = self._call(
            "save_face", files={"image": ("image", _bytes(image))}, data=data
        )
        return face

    def list_faces(self, label: str | None = None) -> list[dict[str, Any]]:
        faces: list[dict[str, Any]] = self._call(
            "list_faces", params={"label": label} if label else None
        )
        return faces

    def rename_face(self, face_id: str, name: str) -> dict[str, Any]:
        face: dict[str, Any] = self._call(
            "rename_face", path={"face_id": face_id}, json={"name": name}
        )
        return face

    def delete_face(self, face_id: str) -> None:
        self._call("delete_face", path={"face_id": face_id})

    # job templates
    def create_template(
        self,
        name: str,
        *,
        options: dict[str, Any],
        faces: Sequence[str] = (),
        mapping: dict[str, int] | None = None,
        description: str = "",
    ) -> dict[str, Any]:
        """Save a template: ``faces`` are saved faces by name (the sources, in order),
        ``mapping`` face name -> target face index. Jobs and batches then pass
        ``template=`` its id or name instead of options and sources."""
        body: dict[str, Any] = {
            "name": name,
            "description": description,
            "options": options,
            "faces": list(faces),
        }
        if mapping is not None:
            body["mapping"] = mapping
        template: dict[str, Any] = self._call("create_template", json=body)
        return template

    def list_templates(self) -> list[dict[str, Any]]:
        templates: list[dict[str, Any]] = self._call("list_templates")
        return templates

    def get_template(self, template_id: str) -> dict[str, Any]:
        template: dict[str, Any] = self._call("get_template", path={"template_id": template_id})
        return template

    def delete_template(self, template_id: str) -> None:
        self._call("delete_template", path={"template_id": template_id})

    # webhooks
    def create_webhook(self, url: str, event_types: Sequence[str] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"url": url}
        if event_types is not None:
            body["event_types"] = list(event_types)
        endpoint: dict[str, Any] = self._call("create_webhook", json=body)
        return endpoint

    def list_deliveries(self) -> list[dict[str, Any]]:
        deliveries: list[dict[str, Any]] = self._call("list_deliveries")
        return deliveries

    @staticmethod
    def _wait(read: Any, timeout: float, poll: float, done: str | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            state: dict[str, Any] = read()
            status = state.get("status")
            if (status == done) if done else (status in TERMINAL):
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"still {status} after {timeout} s")
            time.sleep(poll)

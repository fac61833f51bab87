"""Marks only this installation can make, and a public verify that dates nothing: a watermark
in the old public layout (installation id + serial + CRC-24, which anyone could compute) does
not verify; real results still do after what shared copies go through; serials are random
(no sequence in the database); the public and other tenants get no ``made_at``; a manifest
copied onto another picture is not "made here", and no remote manifest is ever fetched."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from sqlalchemy import select, text
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, photo
from tests.dbkit import drop_database, fresh_database
from tests.provenance.test_verify_api import marked_result, verify
from tests.testdata import FACES

from facegate.database import create_session_factory, session_scope
from facegate.engine.watermark import embed_watermark
from facegate.provenance.keys import installation_id_of, load_keys
from facegate.provenance.repository import MarkRepository
from facegate.provenance.tables import ProvenanceMark
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)


def crc24(data: bytes) -> int:
    crc = 0xB704CE  # CRC-24/OpenPGP
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x864CFB
    return crc & 0xFFFFFF


def old_public_payload(installation_id: int, serial: int) -> np.ndarray:
    """The payload as it was before the MAC: nothing in it a stranger could not compute
    (the installation id is any manifest's URN, or the CA certificate's hash)."""
    body = (installation_id << 24) | serial
    word = (body << 24) | crc24(body.to_bytes(5, "big"))
    return np.array([(word >> (63 - i)) & 1 for i in range(64)], dtype=np.uint8)


def jpeg_bytes(frame: np.ndarray, quality: int = 95) -> bytes:
    return bytes(cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes())


def decoded(data: bytes) -> np.ndarray:
    return np.asarray(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR))


def serials(state: Any) -> list[int]:
    with session_scope(state.session_factory) as session:
        return [row.serial for row in session.scalars(select(ProvenanceMark))]


async def test_a_forged_mark_does_not_verify_and_a_real_one_does_after_shared_copies(
    make_client: Any,
) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        owner = h.headers("studio")
        # 512 wide: a copy halved from a result under 480 px can lose the mark
        # (docs/provenance.md, "Small pictures").
        job_id, data = await marked_result(h.client, owner, width=512)
        ca_pem = load_keys(h.state.settings.provenance_path).ca_pem
        (serial,) = serials(h.state)

        # Any picture, marked with a serial this installation issued, in the public layout.
        stranger = cv2.imread(str(FACES / "man_frontal_glasses.jpg"))
        for guess in (serial, 1):
            forged = embed_watermark(
                stranger, old_public_payload(installation_id_of(ca_pem), guess)
            )
            for headers in (None, owner):
                answer = await verify(h.client, jpeg_bytes(forged), headers)
                assert not answer["watermark"]["found"], guess
                assert not answer["made_by_this_installation"], guess
                assert answer["job"] is None

        # The real result, after JPEG 70, a 50 % resize and a 10 % crop: still traced.
        result = decoded(data)
        height, width = result.shape[:2]
        copies: dict[str, Callable[[np.ndarray], np.ndarray]] = {
            "jpeg70": lambda f: f,
            "half": lambda f: cv2.resize(
                f, (width // 2, height // 2), interpolation=cv2.INTER_AREA
            ),
            "crop10": lambda f: f[height // 20 : -height // 20, width // 20 : -width // 20],
        }
        for name, transform in copies.items():
            copy = jpeg_bytes(transform(result), 70 if name == "jpeg70" else 90)
            answer = await verify(h.client, copy, owner)
            assert answer["watermark"]["found"], name
            assert answer["made_by_this_installation"], name
            assert answer["job"]["job_id"] == job_id, name
            assert answer["job"]["traced_by"] == ["watermark"], name


async def test_only_the_owner_learns_when_and_which_job(make_client: Any) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        owner = h.headers("studio")
        job_id, first = await marked_result(h.client, owner)
        _, second = await marked_result(h.client, owner)
        a, b = serials(h.state)
        assert abs(a - b) > 1  # drawn at random: consecutive jobs are not numbered in order

        mine = await verify(h.client, first, owner)
        assert mine["made_at"] is not None
        assert mine["job"]["job_id"] == job_id
        for headers in (None, h.headers("rival")):
            for data in (first, second):
                seen = await verify(h.client, data, headers)
                assert seen["made_by_this_installation"]
                assert seen["made_at"] is None
                assert seen["job"] is None
                text_seen = json.dumps(seen)
                assert job_id not in text_seen
                assert str(a) not in text_seen
                assert str(b) not in text_seen


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    engine, _, schema = fresh_database(request.param, tmp_path, name="marks", what="marks")
    yield request.param, engine
    drop_database(engine, schema)


def test_serials_are_random_and_the_column_has_no_sequence(database: tuple[str, Any]) -> None:
    backend, engine = database
    with session_scope(create_session_factory(engine)) as session:
        issued = [MarkRepository(session).issue("studio", uuid.uuid4()).serial for _ in range(40)]
        # A retry of the same job keeps its mark.
        job = uuid.uuid4()
        assert MarkRepository(session).issue("studio", job) == MarkRepository(session).issue(
            "studio", job
        )
    assert len(set(issued)) == len(issued)
    assert all(0 <= s < 1 << 24 for s in issued)
    assert sorted(issued) != issued  # not in order
    assert max(issued) > 1 << 20  # spread over the space, not counting from 1
    if backend == "postgresql":
        with engine.connect() as connection:
            default = connection.execute(
                text(
                    "SELECT column_default FROM information_schema.columns WHERE "
                    "table_schema = current_schema() AND table_name = 'provenance_marks' "
                    "AND column_name = 'serial'"
                )
            ).scalar_one()
            sequences = connection.execute(
                text(
                    "SELECT count(*) FROM information_schema.sequences "
                    "WHERE sequence_schema = current_schema()"
                    " AND sequence_name LIKE 'provenance_marks%'"
                )
            ).scalar_one()
        assert default is None
        assert sequences == 0


def app11_segments(data: bytes) -> bytes:
    """The JPEG's APP11 segments: where C2PA embeds its manifest store (JUMBF)."""
    found, index = b"", 2
    while index < len(data) and data[index + 1] != 0xDA:
        length = int.from_bytes(data[index + 2 : index + 4], "big")
        if data[index + 1] == 0xEB:
            found += data[index : index + 2 + length]
        index += 2 + length
    return found


class Listener:
    """A local TCP listener counting the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def with_remote_manifest(data: bytes, url: str) -> bytes:
    """The JPEG with an XMP packet naming a remote manifest (``dcterms:provenance``)."""
    xmp = (
        b"http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF "
        b"xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description "
        b"rdf:about='' xmlns:dcterms='http://purl.org/dc/terms/' dcterms:provenance='"
        + url.encode()
        + b"'/></rdf:RDF></x:xmpmeta>"
    )
    segment = b"\xff\xe1" + (len(xmp) + 2).to_bytes(2, "big") + xmp
    return data[:2] + segment + data[2:]


async def test_a_copied_manifest_is_not_made_here_and_no_remote_manifest_is_fetched(
    make_client: Any,
) -> None:
    listener = Listener()
    try:
        async with make_client(services=[workers_service], workers=1) as h:
            h.create_tenant("studio", **DEBUG_TENANT_POLICY)
            owner = h.headers("studio")
            _, data = await marked_result(h.client, owner)
            other = photo("man_frontal_glasses.jpg", width=320)

            # The genuine manifest store moved onto another picture: c2pa's hash binding
            # fails, and the picture carries no mark of ours.
            copied = other[:2] + app11_segments(data) + other[2:]
            for headers in (None, owner):
                answer = await verify(h.client, copied, headers)
                assert answer["manifest"]["state"] == "tampered"
                assert not answer["manifest"]["signed_by_this_installation"]
                assert not answer["made_by_this_installation"]

            # A picture naming a remote manifest (an address the caller chose): never fetched.
            remote = with_remote_manifest(other, f"http://127.0.0.1:{listener.port}/m.c2pa")
            answer = await verify(h.client, remote, None)
            assert not answer["made_by_this_installation"]
            assert answer["manifest"]["state"] == "absent"
            assert answer["manifest"]["failures"] == ["facegate.manifest.remote.not_fetched"]
            assert str(listener.port) not in json.dumps(answer)
    finally:
        listener.close()
    assert listener.connections == 0

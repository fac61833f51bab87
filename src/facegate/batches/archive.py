"""The results of a batch as one ZIP, streamed: each result is read from storage in
chunks and written through ``zipfile`` to a sink that hands the bytes on as they come, so
neither the archive nor a result is ever held whole (stored, not deflated: images and
videos are compressed already)."""

from __future__ import annotations

import uuid
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from facegate.storage.tenant import TenantStore


@dataclass(frozen=True)
class ArchiveEntry:
    """One result in the archive: its name there and where it is stored."""

    name: str
    job_id: uuid.UUID
    stored_name: str


class _Sink:
    """A write-only, unseekable file: zipfile then writes data descriptors after each
    member, and what it wrote so far is taken with :meth:`drain`."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.offset = 0

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        self.offset += len(data)
        return len(data)

    def tell(self) -> int:
        return self.offset

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None

    def drain(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        return data


def archive_chunks(
    store: TenantStore, tenant_id: str, entries: Sequence[ArchiveEntry]
) -> Iterator[bytes]:
    sink = _Sink()
    with zipfile.ZipFile(sink, mode="w", compression=zipfile.ZIP_STORED) as archive:
        for entry in entries:
            with archive.open(entry.name, "w", force_zip64=True) as member:
                for chunk in store.iter_chunks(
                    tenant_id, "outputs", entry.job_id, entry.stored_name
                ):
                    member.write(chunk)
                    if sink.parts:
                        yield sink.drain()
            yield sink.drain()  # the member's data descriptor
    yield sink.drain()  # the central directory

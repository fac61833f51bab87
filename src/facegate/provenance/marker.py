"""Marking a job's result: the worker issues the job's mark before it runs (the runner puts
the watermark into the pixels before encoding) and signs the encoded result with the C2PA
manifest before storing it (``WorkerPool._store_result``: moderate -> mark -> store).

No tenant policy reaches this: the machine-readable marks are always on.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from sqlalchemy.orm import Session

from facegate.provenance.keys import InstallationKeys, create_keys, keys_exist, load_keys
from facegate.provenance.manifest import (
    EMBEDDED_FORMATS,
    SIDECAR_FORMATS,
    manifest_definition,
    reference_urn,
    sign_bytes,
    sign_file,
    sign_sidecar,
)
from facegate.provenance.payload import WATERMARK, encode_payload
from facegate.provenance.repository import MarkRepository

if TYPE_CHECKING:
    from facegate.jobs.tables import Job


class MarkableOutput(Protocol):
    """What the marker signs (the worker's ``JobOutput``): an encoded result, as bytes or
    as the file a run wrote, its format, and the sidecar manifest it may get."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def data(self) -> bytes | Path: ...

    @property
    def format(self) -> str: ...


Output = TypeVar("Output", bound=MarkableOutput)

SIDECAR_NAME = "manifest.c2pa"


@dataclass(frozen=True)
class JobMark:
    """What marks one job's result: the watermark payload (its serial and the key its MAC
    is made with) and the manifest's reference."""

    installation_id: int
    serial: int
    reference: str
    watermark_key: bytes = dataclasses.field(repr=False)

    @cached_property
    def bits(self) -> npt.NDArray[np.uint8]:
        return encode_payload(self.watermark_key, self.serial)

    @property
    def urn(self) -> str:
        return reference_urn(self.installation_id, self.reference)


class ResultMarker:
    """The installation's marking: issues marks, signs results. One per worker process."""

    def __init__(self, keys: InstallationKeys) -> None:
        self.keys = keys
        self.installation_id = keys.installation_id

    def issue(self, session: Session, job: Job) -> JobMark:
        return self.issue_for(session, job.tenant_id, job.id)

    def issue_for(self, session: Session, tenant_id: str, owner_id: uuid.UUID) -> JobMark:
        """The mark of a job or a live stream (``owner_id``: the job's or the stream's id,
        what a trace of a marked frame names)."""
        row = MarkRepository(session).issue(tenant_id, owner_id)
        return JobMark(
            self.installation_id, row.serial, row.reference, self.keys.mac_key(WATERMARK)
        )

    def sign(
        self,
        output: Output,
        mark: JobMark,
        processors: list[str],
        consent: Sequence[str] = (),
    ) -> Output:
        """The output with its manifest: embedded (JPEG, PNG, WebP, MP4) or, for WebM, as
        the sidecar the worker stores beside it. ``consent``: the job's attestation ids."""
        if output.format in SIDECAR_FORMATS:
            assert isinstance(output.data, Path)
            sidecar = sign_sidecar(self.keys, mark.urn, processors, output.data, consent)
            return dataclasses.replace(output, sidecar=sidecar)
        if output.format not in EMBEDDED_FORMATS:
            raise ValueError(f"no way to mark a {output.format} result")
        definition = manifest_definition(mark.urn, processors, consent=consent)
        if isinstance(output.data, Path):
            sign_file(self.keys, output.data, output.format, definition)
            return output  # signed in place; its size is read from the file
        return dataclasses.replace(
            output, data=sign_bytes(self.keys, output.data, output.format, definition)
        )


MarkerFactory = Callable[[], ResultMarker]


def marker_for(directory: Path, *, create: bool = False) -> ResultMarker:
    """The marker of the keys in ``directory``; with ``create`` (the embedded shape), keys
    are made on first use, as the SQLite database is. ProvenanceUnavailable otherwise."""
    if create and not keys_exist(directory):
        create_keys(directory)
    return ResultMarker(load_keys(directory))

"""The hash chain: how an event's hash is computed, and how a chain is verified.

``hash = sha256(prev_hash || canonical_json(fields))`` where the fields are every column
but ``seq`` and ``hash``. Leaving ``seq`` out means verification judges rows by their links
alone: an edited row no longer matches its own hash, a deleted row leaves its successor
pointing at a hash nobody has, and an inserted row is skipped over by its successor's link.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from facegate.observability.audit.tables import GENESIS_HASH


class ChainRow(Protocol):
    seq: int
    created_at: datetime
    actor: str
    tenant_id: str | None
    action: str
    target: str
    details: dict[str, Any]
    request_id: str | None
    prev_hash: str
    hash: str


def canonical_fields(row: ChainRow) -> dict[str, Any]:
    return {
        "created_at": row.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
        "actor": row.actor,
        "tenant_id": row.tenant_id,
        "action": row.action,
        "target": row.target,
        "details": row.details,
        "request_id": row.request_id,
    }


def compute_hash(prev_hash: str, fields: dict[str, Any]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(prev_hash.encode("ascii") + canonical.encode("utf-8")).hexdigest()


def row_hash(row: ChainRow) -> str:
    return compute_hash(row.prev_hash, canonical_fields(row))


@dataclass(frozen=True)
class Problem:
    """One finding of :func:`verify_chain`; ``seq`` names the row concerned."""

    seq: int
    kind: str  # edited | inserted | deleted | broken-link
    detail: str

    def __str__(self) -> str:
        return f"row {self.seq}: {self.kind}: {self.detail}"


@dataclass(frozen=True)
class Verification:
    rows: int
    head_seq: int
    head_hash: str
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_chain(rows: Iterable[ChainRow], head: tuple[int, str] | None = None) -> Verification:
    """Walk the rows in ``seq`` order and report every break; ``head`` is the stored
    (seq, hash) of the last event, when the head row exists."""
    problems: list[Problem] = []
    seen: dict[str, int] = {GENESIS_HASH: 0}  # hash -> seq of the row that has it
    expected_prev, last_seq, count = GENESIS_HASH, 0, 0
    for row in rows:
        count += 1
        if row.prev_hash != expected_prev:
            problems.append(_link_problem(row, last_seq, seen))
        if row_hash(row) != row.hash:
            problems.append(
                Problem(row.seq, "edited", "its content no longer matches its stored hash")
            )
        seen[row.hash] = row.seq
        expected_prev, last_seq = row.hash, row.seq
    if head is not None:
        head_seq, head_hash = head
        if head_hash != expected_prev or head_seq != last_seq:
            problems.append(_head_problem(head_seq, head_hash, last_seq, seen))
    return Verification(count, last_seq, expected_prev, problems)


def _link_problem(row: ChainRow, last_seq: int, seen: dict[str, int]) -> Problem:
    linked = seen.get(row.prev_hash)
    if linked is not None and linked != last_seq:
        # The row links to an earlier row: the rows in between are not part of the chain.
        return Problem(
            last_seq,
            "inserted",
            f"row {row.seq} links to row {linked}, so rows after {linked} up to {last_seq} "
            "were inserted",
        )
    if row.seq - last_seq > 1:
        missing = (
            f"row {last_seq + 1}"
            if row.seq - last_seq == 2
            else f"rows {last_seq + 1}..{row.seq - 1}"
        )
        return Problem(last_seq + 1, "deleted", f"{missing} deleted (row {row.seq} links past it)")
    return Problem(
        row.seq,
        "broken-link",
        f"its previous hash matches no row: a row between {last_seq} and {row.seq} was "
        f"deleted, or row {last_seq} was edited and its hash rewritten",
    )


def _head_problem(head_seq: int, head_hash: str, last_seq: int, seen: dict[str, int]) -> Problem:
    if head_hash in seen and seen[head_hash] < last_seq:
        return Problem(
            seen[head_hash] + 1,
            "inserted",
            f"the chain's head is row {seen[head_hash]}; rows after it up to {last_seq} were "
            "appended outside the audit API",
        )
    return Problem(
        head_seq,
        "deleted",
        f"the head names row {head_seq} but the chain ends at row {last_seq}: rows at the end "
        "were deleted",
    )

"""The fenced code blocks of README.md and docs/*.md, and what the docs test does with each.

Convention (for whoever writes docs):

- Every fenced block names its language: ``sh`` / ``bash`` / ``shell`` / ``console`` for
  commands, anything else (``text``, ``yaml``, ``json``, ``alloy``...) for what is not run.
- A shell block is **run** by ``tests/docs/test_docs_commands.py``, in order with the other
  shell blocks of its file, in one bash (so ``export`` carries on, as in a terminal), from a
  scratch copy of the clone, against a ``facegate serve --demo`` the test starts.
- A shell block that cannot run there says why, on the line right above its fence::

      <!-- docs-test: skip: needs a Kubernetes cluster -->

  The reason is required. ``<!-- docs-test: needs redis -->`` runs the block only where the
  test Redis is available (CI=true or FACEGATE_TEST_REDIS_URL), with FACEGATE_REDIS_URL set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>skip|needs)\b:?\s*(?P<what>.*?)\s*-->\s*$")
NEEDS = frozenset({"redis"})


@dataclass(frozen=True)
class Block:
    doc: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    skip: str | None  # the stated reason, when marked not runnable here
    needs: frozenset[str]

    @property
    def is_shell(self) -> bool:
        return self.language in SHELL_LANGUAGES

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks_of(path: Path, root: Path = ROOT) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    doc = path.relative_to(root).as_posix()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence, language = opening.groups()
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        code = "\n".join(line.removeprefix(indent) for line in lines[index + 1 : end])
        skip, needs = _marker(lines, index)
        found.append(Block(doc, index + 1, language.lower(), code, skip, needs))
        index = end + 1
    return found


def _marker(lines: list[str], fence_index: int) -> tuple[str | None, frozenset[str]]:
    above = fence_index - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    found = MARKER.match(lines[above]) if above >= 0 else None
    if found is None:
        return None, frozenset()
    if found["kind"] == "skip":
        return found["what"], frozenset()
    return None, frozenset(found["what"].replace(",", " ").split())


def dangling_markers(path: Path) -> list[int]:
    """Lines holding a marker that no fence follows (a marker that marks nothing)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    dangling = []
    for number, line in enumerate(lines):
        if MARKER.match(line) is None:
            continue
        after = number + 1
        while after < len(lines) and not lines[after].strip():
            after += 1
        if after >= len(lines) or FENCE.match(lines[after]) is None:
            dangling.append(number + 1)
    return dangling


def all_blocks() -> list[Block]:
    return [block for path in documents() for block in blocks_of(path)]

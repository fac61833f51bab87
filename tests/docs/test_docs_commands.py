"""Every command printed in README.md and docs/*.md works as printed.

``docblocks`` finds the fenced blocks and states the convention: a shell block is run unless
the line above it says ``<!-- docs-test: skip: REASON -->``. Here the runnable blocks of each
document run in one bash, in order, as a user pasting them would, from a scratch folder laid
out like a clone (``.venv`` and ``examples/`` linked, ``deploy/`` copied, ``../shared`` the
test data), against a ``facegate serve --demo`` started in that folder (as ``make serve``
does). Two things differ from a terminal, both so that a failure cannot pass unseen: bash
runs with ``set -euo pipefail``, and ``curl`` is wrapped with ``--fail-with-body`` (an HTTP
error fails the block, its problem+json printed). The documented address
``http://127.0.0.1:8000`` is rewritten to the test server's free port.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from tests.docs.docblocks import ROOT, Block, all_blocks, blocks_of, dangling_markers, documents
from tests.liveserver import free_port, stop_process
from tests.ratelimit.ratelimitfactories import REDIS_SKIP, test_redis_url, unique_prefix
from tests.testdata import FACES

DOCUMENTED_URL = "http://127.0.0.1:8000"
CONVENTION = (
    "Docs convention (tests/docs/docblocks.py): every fence names its language; a shell "
    "block is run unless the line above it says <!-- docs-test: skip: REASON -->"
)
PRELUDE = """\
set -euo pipefail
export PATH="$PWD/.venv/bin:$PATH"
curl() { command curl --fail-with-body --show-error "$@"; }
"""


def test_every_shell_block_is_run_or_says_why() -> None:
    problems = []
    for path in documents():
        problems += [f"{path.name}:{n}: marker above no code block" for n in dangling_markers(path)]
    for block in all_blocks():
        if not block.language:
            problems.append(f"{block.where}: a code block without a language (sh, text, ...)")
        elif block.skip is not None and not block.is_shell:
            problems.append(f"{block.where}: a skip marker on a {block.language} block")
        elif block.skip == "":
            problems.append(f"{block.where}: 'docs-test: skip' without a reason")
        elif block.needs - {"redis"}:
            problems.append(f"{block.where}: unknown need {sorted(block.needs)}")
    assert not problems, "\n".join([*problems, CONVENTION])


def test_the_parser_sees_markers_and_fences(tmp_path: Path) -> None:
    """The convention itself: the linter above would pass vacuously if this broke."""
    doc = tmp_path / "x.md"
    doc.write_text(
        "```sh\necho run\n```\n\n<!-- docs-test: skip: needs a cluster -->\n"
        "```bash\nkubectl apply\n```\n<!-- docs-test: needs redis -->\n```sh\nx\n```\n"
        "~~~text\nout\n~~~\n<!-- docs-test: skip: dangling -->\ntext\n",
        encoding="utf-8",
    )
    blocks = blocks_of(doc, root=tmp_path)
    assert [(b.line, b.language, b.skip, sorted(b.needs)) for b in blocks] == [
        (1, "sh", None, []),
        (6, "bash", "needs a cluster", []),
        (10, "sh", None, ["redis"]),
        (13, "text", None, []),
    ]
    assert blocks[1].code == "kubectl apply"
    assert dangling_markers(doc) == [16]


@dataclass(frozen=True)
class Scratch:
    repo: Path
    url: str
    env: dict[str, str]
    log: Path  # the server's stdout and stderr


def _clean_env(repo: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACEGATE_")}
    for spec_name in ("TENANT_ID", "MODEL_PATH", "OUTPUT_DIR", "MODEL_TAG"):
        env.pop(spec_name, None)
    env.update(HOME=str(repo.parent), FACEGATE_WORKERS="1", PYTHONUNBUFFERED="1")
    return env


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scratch]:
    """A clone-shaped folder and ``facegate serve --demo`` running in it."""
    if shutil.which("curl") is None or shutil.which("jq") is None:
        pytest.skip("needs curl and jq (sudo scripts/system-packages installs them)")
    base = tmp_path_factory.mktemp("docs")
    repo = base / "facegate"
    repo.mkdir()
    (base / "shared").symlink_to(FACES.parents[1], target_is_directory=True)
    for linked in (".venv", "examples"):
        (repo / linked).symlink_to(ROOT / linked, target_is_directory=True)
    shutil.copytree(ROOT / "deploy", repo / "deploy")
    port = free_port()
    env = _clean_env(repo)
    log = base / "serve.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [str(repo / ".venv/bin/facegate"), "serve", "--demo", "--port", str(port)],
            cwd=repo,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(server, url, log)
        yield Scratch(repo, url, env, log)
    finally:
        stop_process(server)


def _wait_healthy(server: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"facegate serve --demo exited:\n{log.read_text(errors='replace')}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    pytest.fail(f"facegate serve --demo not healthy in 90 s:\n{log.read_text(errors='replace')}")


def script_for(blocks: list[Block], url: str) -> str:
    parts = [PRELUDE]
    for block in blocks:
        parts.append(f"echo '### {block.where}' >&2\nset -x\n{block.code}\nset +x\n")
    return "\n".join(parts).replace(DOCUMENTED_URL, url)


def _runnable(doc: Path) -> list[Block]:
    runnable = []
    for block in blocks_of(doc):
        if not block.is_shell or block.skip is not None:
            continue
        if "redis" in block.needs and test_redis_url() is None:
            continue  # reported by the skip of test_redis_blocks_are_gated below
        runnable.append(block)
    return runnable


def _with_shell_blocks() -> list[Path]:
    return [doc for doc in documents() if any(block.is_shell for block in blocks_of(doc))]


@pytest.mark.parametrize("doc", _with_shell_blocks(), ids=lambda path: path.name)
def test_documented_commands_work(doc: Path, scratch: Scratch) -> None:
    blocks = _runnable(doc)
    if not blocks:
        pytest.skip(f"every shell block of {doc.name} states why it is not run here")
    env = dict(scratch.env)
    if test_redis_url() is not None:
        env.update(
            FACEGATE_REDIS_URL=test_redis_url() or "",
            FACEGATE_RATE_LIMIT_KEY_PREFIX=unique_prefix(),
        )
    script = script_for(blocks, scratch.url)
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=scratch.repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=240,
        check=False,
    )
    output = done.stdout
    assert done.returncode == 0, f"a command of {doc.name} failed:\n{output[-6000:]}\n{CONVENTION}"
    failed_run = re.search(r"^error: ", output, re.MULTILINE)
    assert failed_run is None, f"{doc.name}: a command printed an error:\n{output[-6000:]}"


def test_redis_blocks_are_gated() -> None:
    gated = [block.where for block in all_blocks() if "redis" in block.needs]
    if gated and test_redis_url() is None:
        pytest.skip(f"{', '.join(gated)}: {REDIS_SKIP}")


def test_the_server_log_is_one_format_one_line_per_request(scratch: Scratch) -> None:
    """After the documents' jobs ran on it: no native-library lines (absl, TFLite), no
    uvicorn console lines, and each request logged once, as JSON."""
    key = (scratch.repo / "var/demo-key").read_text().strip()
    auth = {"Authorization": f"Bearer {key}"}
    with (FACES / "woman_a_selfie_frontal_01.jpg").open("rb") as source:
        with (FACES / "man_frontal_glasses.jpg").open("rb") as target:
            files = {"source": source, "target": target}
            job = httpx.post(f"{scratch.url}/v1/jobs", headers=auth, files=files, timeout=60)
    assert job.status_code == 202, job.text
    with httpx.stream(
        "GET", f"{scratch.url}{job.json()['links']['events']}", headers=auth, timeout=120
    ) as events:
        assert "event: end" in "".join(events.iter_text())
    lines = scratch.log.read_text(errors="replace").splitlines()
    banner = [line for line in lines if line.startswith("  ")]  # serve --demo's banner
    assert any(line.startswith("  API key") for line in banner)
    others = [line for line in lines if line.strip() and not line.startswith("  ")]
    not_json = [line for line in others if not line.startswith("{")]
    assert not not_json, "\n".join(not_json[:10])
    records = [json.loads(line) for line in others]
    requests = [r for r in records if r["event"] == "http.request"]
    assert any(r["route"] == "/v1/jobs" and r["method"] == "POST" for r in requests)
    assert any(r.get("job_id") == job.json()["id"] and r["event"] == "job.done" for r in records)
    assert any("Uvicorn running on" in r["event"] for r in records)

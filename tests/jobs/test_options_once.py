"""A submission's options are parsed and checked against the plan once, at the door: once
for a job, once for a whole batch (not once more per item in the services), and a plan
refusal still answers 403 before anything is stored."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from tests.api.jobhelpers import DEBUG_TENANT_POLICY, count_objects, photo

from facegate.jobs import options as options_module
from facegate.jobs import policy as policy_module

DEBUG = json.dumps({"processors": ["face_debugger"]})


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the calls of parse_options and check_spec_allowed, under every name any
    facegate module imported them by."""
    counted: Counter[str] = Counter()
    originals: dict[str, Callable[..., Any]] = {
        "parse_options": options_module.parse_options,
        "check_spec_allowed": policy_module.check_spec_allowed,
    }

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return original(*args, **kwargs)

        return wrapper

    for module in [m for n, m in sys.modules.items() if n.startswith("facegate")]:
        for name, original in originals.items():
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, counting(name, original))
    return counted


def files(targets: int) -> list[tuple[str, tuple[str, bytes, str]]]:
    image = photo()
    return [("target", (f"t{i}.jpg", image, "image/jpeg")) for i in range(targets)]


async def test_options_are_parsed_and_checked_once(make_client: Any, calls: Counter[str]) -> None:
    async with make_client() as h:  # no workers: the jobs stay queued
        h.create_tenant("studio", **DEBUG_TENANT_POLICY)
        editor = h.headers("studio", ("editor",))
        job = await h.client.post(
            "/v1/jobs", headers=editor, files=files(1), data={"options": DEBUG}
        )
        assert job.status_code == 202, job.text
        assert calls == {"parse_options": 1, "check_spec_allowed": 1}

        calls.clear()
        batch = await h.client.post(
            "/v1/batches", headers=editor, files=files(3), data={"options": DEBUG}
        )
        assert batch.status_code == 202, batch.text
        assert calls == {"parse_options": 1, "check_spec_allowed": 1}

        stored = count_objects(h.state)
        refused = await h.client.post(
            "/v1/jobs",
            headers=editor,
            files=files(1),
            data={"options": json.dumps({"processors": ["face_enhancer"]})},
        )
        assert refused.status_code == 403, refused.text
        assert count_objects(h.state) == stored

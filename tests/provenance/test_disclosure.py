"""The visible disclosure label (EU AI Act Art. 50(4)): a tenant policy, off by default; the
machine-readable marks are on whatever the policy says, and no policy field turns them off."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image
from pydantic import ValidationError
from tests.api.jobhelpers import DEBUG_TENANT_POLICY
from tests.provenance.test_verify_api import marked_result, verify

from facegate.tenancy.schemas import PolicySpec
from facegate.worker.embedded import workers_service

pytestmark = pytest.mark.timeout(300)


def corner(data: bytes) -> np.ndarray:
    """The bottom-right 20 % of the picture (where the default label sits)."""
    pixels = np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=np.float64)
    height, width = pixels.shape
    return pixels[int(height * 0.8) :, int(width * 0.5) :]


async def test_the_label_is_drawn_only_when_the_policy_asks_and_marks_stay(
    make_client: Any,
) -> None:
    async with make_client(services=[workers_service], workers=1) as h:
        h.create_tenant("plain", **DEBUG_TENANT_POLICY)
        h.create_tenant(
            "labelled",
            disclosure_label={"text": "AI-generated", "corner": "bottom-right"},
            **DEBUG_TENANT_POLICY,
        )
        plain_headers, labelled_headers = h.headers("plain"), h.headers("labelled")
        _, plain = await marked_result(h.client, plain_headers)
        _, labelled = await marked_result(h.client, labelled_headers)

        # The label: a darkened box with white text in the corner; none without the policy.
        difference = np.abs(corner(labelled) - corner(plain))
        assert difference.max() > 100
        assert (corner(labelled) > 200).sum() > 20  # the white strokes of the text
        top_left = np.asarray(Image.open(io.BytesIO(labelled)).convert("L"))[:20, :20]
        plain_top_left = np.asarray(Image.open(io.BytesIO(plain)).convert("L"))[:20, :20]
        assert np.abs(top_left.astype(int) - plain_top_left.astype(int)).max() < 30

        for data, headers in ((plain, plain_headers), (labelled, labelled_headers)):
            result = await verify(h.client, data, headers)
            assert result["manifest"]["state"] == "valid"
            assert result["watermark"]["found"]


def test_no_policy_field_turns_the_machine_readable_marks_off() -> None:
    assert PolicySpec().disclosure_label is None  # the visible label is off by default
    for field in ("provenance", "watermark", "c2pa", "marks"):
        with pytest.raises(ValidationError):
            PolicySpec.model_validate({field: False})
    with pytest.raises(ValidationError):
        PolicySpec.model_validate({"disclosure_label": {"text": "", "corner": "bottom-right"}})
    with pytest.raises(ValidationError):
        PolicySpec.model_validate({"disclosure_label": {"text": "x", "corner": "middle"}})

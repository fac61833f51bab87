"""Which frames of a video moderation checks, and checking them as they pass.

Fixed positions (one frame a second from the first) let a clip hide content between them,
so :class:`FrameSampler` keeps a guarantee instead: every run of frames left unchecked is
shorter than ``gap`` seconds of presentation time *and* than ``gap_frames`` frames, whatever
the timestamps say (a variable-frame-rate clip is judged by its frames as well as its time:
one frame shown for a second is checked, and so is one of a burst of many frames packed
into a few milliseconds). So any run of ``gap`` seconds or of ``gap_frames`` consecutive
frames holds a checked frame, wherever it is placed. The first checked position is drawn at
random for each video (the phase): a run shorter than that is caught in proportion to its
length, never by knowing where the checks fall.

The sampler looks one frame ahead: a frame's display time is known only when the next one
arrives, so it decides on frame *k* when frame *k + 1* is offered. The last frame is always
checked (its display time is unknown).

:class:`VideoScreen` reduces each picked frame to the classifier's input (224², the frame
is not kept) and scores them in batches through :class:`~facegate.engine.moderation.Moderator`,
on a thread of its own: the caller (a video's encoding thread, in frame order) hands a batch
over and goes on encoding while the classifier runs (~0.5 s for 8 frames on the 2-core
machine: a stall of the encoder every 4 s of video when run in line); :meth:`close` waits
for every batch.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import av.error
import numpy as np
import numpy.typing as npt

from facegate.engine.errors import CorruptMedia
from facegate.engine.moderation import (
    ModerationPolicy,
    ModerationResult,
    Moderator,
    forward_open_nsfw,
    preprocess,
)
from facegate.engine.types import Frame
from facegate.engine.video.convert import pixels_of

FULL_RANGE = 2  # AVCOL_RANGE_JPEG
#: The frame rule is the time rule at this many frames a second: half a second is 15 frames
#: (a 30 fps clip costs no more than the time rule alone; a 60 fps one twice).
FRAMES_RULE_FPS = 30
BATCH = 8  # frames per classifier call


def gap_frames(gap_seconds: float) -> int:
    """The longest unchecked run in frames that ``gap_seconds`` allows (at least 1)."""
    return max(1, math.ceil(gap_seconds * FRAMES_RULE_FPS))


class FrameSampler:
    """Picks the frames to check, offered in order with their presentation time (seconds)."""

    def __init__(self, gap: float, frames: int, rng: random.Random | None = None) -> None:
        if gap <= 0 or frames < 1:
            raise ValueError("the sampling gap must be positive")
        self.gap = Fraction(gap)
        self.frames = frames
        # The first run's limits: a random share of the gap, in time and in frames alike.
        share = Fraction((rng or random.SystemRandom()).random()).limit_denominator(1 << 20)
        self._limit = max(self.gap * share, Fraction(1, 1 << 20))
        self._frame_limit = max(1, math.ceil(frames * share))
        self._run_start: Fraction | None = None  # time of the run's first unchecked frame
        self._run_frames = 0  # unchecked frames in the run so far
        self._held = False  # a frame is waiting for the next one's time

    def offer(self, time: Fraction) -> bool:
        """Offer the next frame; whether the *previous* one is to be checked."""
        if not self._held:
            self._held = True
            self._run_start = time
            return False
        assert self._run_start is not None
        # The previous frame stays unchecked only if the run, it included, stays under both
        # limits (a clock that goes backwards counts as no time: the frame rule still holds).
        check = time - self._run_start >= self._limit or self._run_frames + 1 >= self._frame_limit
        if check:
            self._limit, self._frame_limit = self.gap, self.frames
            self._run_start, self._run_frames = time, 0
        else:
            self._run_frames += 1
        return check

    def end(self) -> bool:
        """The stream ended: whether a held (last) frame is to be checked (always)."""
        held, self._held = self._held, False
        return held


@dataclass
class _Held:
    index: int
    frame: Callable[[], Frame]


class VideoScreen:
    """Moderation of one video's frames as they pass (input decoding or output rendering):
    :meth:`see` each frame in order, then :meth:`close` for the result. With
    ``reject_ratio`` 0 the result is final at the first flagged frame: :attr:`blocked` says
    so and the caller may stop there."""

    def __init__(
        self,
        moderator: Moderator,
        what: str,
        policy: ModerationPolicy,
        rng: random.Random | None = None,
    ) -> None:
        self.moderator, self.what, self.policy = moderator, what, policy
        self.sampler = FrameSampler(
            policy.video_gap_seconds, gap_frames(policy.video_gap_seconds), rng
        )
        self.scores: list[float] = []  # of the batches scored so far, in frame order
        self.checked: list[int] = []  # indices of the checked frames, in order
        self._batch: list[npt.NDArray[np.float32]] = []
        self._held: _Held | None = None
        self._seen = 0
        self._scoring: list[Future[list[float]]] = []  # batches handed over, in order
        # One thread per screen, made with its first batch; a screen dropped unclosed (a
        # failed run) lets it end with the executor.
        self._scorer: ThreadPoolExecutor | None = None

    @property
    def blocked(self) -> bool:
        """Refused already, whatever the rest holds (``reject_ratio`` 0 and a flagged frame
        among the batches scored so far)."""
        self._collect(wait=False)
        return self.policy.reject_ratio == 0 and any(
            score >= self.policy.threshold for score in self.scores
        )

    def see(self, frame: Frame | Callable[[], Frame], time: Fraction) -> None:
        """The next frame (or how to get its pixels, called only if it is checked) and its
        presentation time in seconds."""
        if self.sampler.offer(time) and self._held is not None:
            self._take(self._held)
        self._held = _Held(self._seen, frame if callable(frame) else _const(frame))
        self._seen += 1

    def close(self) -> ModerationResult:
        if self.sampler.end() and self._held is not None:
            self._take(self._held)
        self._held = None
        self._flush()
        try:
            self._collect(wait=True)
        finally:
            if self._scorer is not None:
                self._scorer.shutdown(wait=False, cancel_futures=True)
                self._scorer = None
        return self.result()

    def result(self) -> ModerationResult:
        """The verdict on the frames scored so far (all of them after :meth:`close`)."""
        self._collect(wait=False)
        return self.moderator.judge(self.what, tuple(self.scores), self.policy)

    def _take(self, held: _Held) -> None:
        self.checked.append(held.index)
        self._batch.append(preprocess(held.frame()))
        if len(self._batch) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            batch, self._batch = np.stack(self._batch), []
            if self._scorer is None:
                self._scorer = ThreadPoolExecutor(1, thread_name_prefix="moderation")
            self._scoring.append(self._scorer.submit(self._score, batch))

    def _score(self, batch: npt.NDArray[np.float32]) -> list[float]:
        return [float(row[1]) for row in forward_open_nsfw(self.moderator.model, batch)]

    def _collect(self, wait: bool) -> None:
        """Move the scores of the batches done (all, with ``wait``) into ``scores``, in order;
        a batch that failed raises here."""
        while self._scoring and (wait or self._scoring[0].done()):
            self.scores.extend(self._scoring.pop(0).result())


def _const(frame: Frame) -> Callable[[], Frame]:
    return lambda: frame


def screen_video(path: Path, screen: VideoScreen) -> ModerationResult:
    """Decode every frame of the video at ``path`` through ``screen`` (pixels converted only
    for the checked ones); stops at the first refusal that is final."""
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            rate = Fraction(stream.average_rate or 25)
            for index, picture in enumerate(container.decode(stream)):
                if picture.pts is not None and picture.time_base is not None:
                    time = picture.pts * Fraction(picture.time_base)
                else:
                    time = index / rate
                screen.see(pixels_of(picture), time)
                if screen.blocked:
                    return screen.result()
    except (av.error.FFmpegError, IndexError) as exc:
        raise CorruptMedia(f"the video cannot be read for moderation: {exc}") from None
    return screen.close()
